/* test_cli — the qgate binary: help, version, usage errors, demo. */
#include "cli/cli.h"
#include "core/closest.h"
#include "cli/commands.h"
#include "store/store.h"
#include "tests/test.h"

TEST(cli_version, e2e)
{
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "--version", NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "qgate " QG_VERSION);
    char want[32];
    snprintf(want, sizeof want, "schema v%d", STORE_SCHEMA_VERSION);
    ASSERT_CONTAINS(o.out, want);
    t_out_free(&o);
    return 0;
}

TEST(cli_help_generated, e2e)
{
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "help", NULL));
    ASSERT_EQ(o.code, 0);
    for (int i = 0; cli_commands[i]; i++)
        ASSERT_CONTAINS(o.out, cli_commands[i]->summary);
    t_out_free(&o);
    /* every option of every command appears in its --help */
    for (int i = 0; cli_commands[i]; i++) {
        ASSERT_OK(t_qgate(&o, cli_commands[i]->name, "--help", NULL));
        ASSERT_EQ(o.code, 0);
        for (const struct cli_opt *op = cli_commands[i]->opts; op && op->name; op++) {
            char want[80];
            snprintf(want, sizeof want, "--%s", op->name);
            ASSERT_CONTAINS(o.out, want);
            ASSERT_CONTAINS(o.out, op->help);
        }
        t_out_free(&o);
    }
    ASSERT_OK(t_qgate(&o, "help", "inspect", NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "usage: qgate inspect MODEL.gguf");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "usage: qgate COMMAND");
    t_out_free(&o);
    return 0;
}

TEST(cli_unknown_command, e2e)
{
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspct", "x.gguf", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "unknown command 'inspct'; did you mean 'inspect'?");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "frobnicate", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "unknown command 'frobnicate'");
    t_out_free(&o);
    return 0;
}

TEST(cli_unknown_option, e2e)
{
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "inspect", "--jsn", "x.gguf", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "unknown option '--jsn' for 'qgate inspect'; did you mean '--json'?");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "runs", "--limt=3", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "did you mean '--limit'?");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "runs", "-z", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "unknown option '-z'");
    t_out_free(&o);
    return 0;
}

TEST(cli_bad_values, e2e)
{
    struct t_out o;
    ASSERT_OK(t_qgate(&o, "runs", "--limit", "many", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "'--limit' of 'qgate runs' expects an integer, got 'many'");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "runs", "--limit", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "needs a value");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "inspect", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "needs MODEL.gguf");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "inspect", "a.gguf", "b.gguf", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "unexpected argument 'b.gguf'");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "runs", "--json=yes", NULL));
    ASSERT_EQ(o.code, 64);
    ASSERT_CONTAINS(o.err, "takes no value");
    t_out_free(&o);
    ASSERT_OK(t_qgate(&o, "show", "abc", NULL));
    ASSERT_EQ(o.code, 64);
    t_out_free(&o);
    return 0;
}

TEST(cli_edit_distance, unit)
{
    ASSERT_EQ(qg_edit_distance("kitten", "sitting"), 3);
    ASSERT_EQ(qg_edit_distance("", "abc"), 3);
    ASSERT_EQ(qg_edit_distance("same", "same"), 0);
    ASSERT_EQ(qg_edit_distance("gaet", "gate"), 1); /* a swap of neighbours: one edit */
    ASSERT_EQ(qg_edit_distance("ca", "abc"), 3);    /* OSA, not full Damerau (which says 2) */
    const char *c[] = {"inspect", "runs", "show"};
    ASSERT_STR_EQ(qg_closest("shw", c, 3), "show");
    ASSERT_STR_EQ(qg_closest("insp", c, 3), "inspect");
    ASSERT(qg_closest("completely-different", c, 3) == NULL);
    const char *cmds[] = {"gate", "run", "compare"};
    ASSERT_STR_EQ(qg_closest("gaet", cmds, 3), "gate");
    return 0;
}

TEST(cli_demo, e2e)
{
    struct t_out o;
    const char *dir = t_path("demo");
    ASSERT_OK(t_qgate(&o, "demo", "--dir", dir, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "qgate gate --suite");
    ASSERT_CONTAINS(o.out, "suite verdict:");
    t_out_free(&o);
    char p[4096];
    snprintf(p, sizeof p, "%s/cand-q4_0.gguf", dir);
    ASSERT_OK(t_qgate(&o, "inspect", p, NULL));
    ASSERT_EQ(o.code, 0);
    ASSERT_CONTAINS(o.out, "Q4_0");
    t_out_free(&o);
    return 0;
}

/* Issue 31, item 11: a short flag means the same thing in every command
 * (the table in README.md, "Short flags"). */
TEST(cli_short_flags_mean_one_thing, unit)
{
    static const struct {
        char c;
        const char *longs[3];
    } table[] = {
        {'b', {"baseline"}}, {'c', {"candidate"}}, {'d', {"dir"}},
        {'f', {"format"}},   {'m', {"model"}},     {'n', {"limit", "max-tokens"}}, /* "at most N" */
        {'o', {"output"}},   {'p', {"prompt"}},    {'P', {"parallel"}},
        {'q', {"quiet"}},    {'r', {"repeats"}},   {'s', {"suite"}},
        {'t', {"threads"}},  {'h', {"help"}},
    };
    for (int i = 0; cli_commands[i]; i++)
        for (const struct cli_opt *op = cli_commands[i]->opts; op && op->name; op++) {
            if (!op->shortname) continue;
            int ok = 0;
            for (size_t k = 0; k < sizeof table / sizeof *table && !ok; k++)
                for (int j = 0; j < 3 && table[k].longs[j] && !ok; j++)
                    ok = table[k].c == op->shortname && !strcmp(table[k].longs[j], op->name);
            if (!ok)
                T_FAIL_("qgate %s: -%c is --%s, which is not what -%c means elsewhere",
                        cli_commands[i]->name, op->shortname, op->name, op->shortname);
        }
    return 0;
}
