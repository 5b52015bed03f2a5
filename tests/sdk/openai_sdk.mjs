// The official OpenAI Node client against `qgate serve` (run by
// tests/test_http.c): node openai_sdk.mjs BASE_URL API_KEY MODEL_ID PROMPT.
// Prints one line per check; exits 1 at the first that fails.
import OpenAI from "openai";

const [base, key, model, promptArg] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 });
let step = "";
function check(cond, what) {
  if (!cond) throw new Error(`${step}: ${what}`);
}

async function main() {
  step = "models.list";
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  check(models.length === 1 && models[0].id === model, `want [${model}], got ${JSON.stringify(models)}`);
  console.log(`ok ${step}: ${models[0].id}`);

  step = "models.retrieve";
  const m = await client.models.retrieve(model);
  check(m.id === model && m.object === "model", JSON.stringify(m));
  console.log(`ok ${step}`);

  step = "completions.create echo+logprobs";
  const prompt = promptArg || "Once upon a time";
  const c = await client.completions.create({
    model, prompt, max_tokens: 4, temperature: 0, echo: true, logprobs: 2,
  });
  const ch = c.choices[0];
  check(ch.text.startsWith(prompt), `text ${JSON.stringify(ch.text)}`);
  const lp = ch.logprobs;
  check(lp.tokens.length === lp.token_logprobs.length && lp.tokens.length === lp.text_offset.length,
        "logprobs arrays differ in length");
  for (let i = 0; i < lp.tokens.length && lp.text_offset[i] < prompt.length; i++) {
    const tok = lp.tokens[i].trimStart();
    if (!tok) continue;
    const at = ch.text.indexOf(tok, lp.text_offset[i]);
    check(at >= lp.text_offset[i] && at <= lp.text_offset[i] + 1,
          `token ${i} ${JSON.stringify(lp.tokens[i])} not at text_offset ${lp.text_offset[i]}`);
  }
  check(c.usage.completion_tokens === 4, `usage ${JSON.stringify(c.usage)}`);
  console.log(`ok ${step}: ${lp.tokens.length} tokens, the prompt's offsets in characters`);

  step = "completions stream";
  const plain = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0 });
  const stream = await client.completions.create({
    model, prompt, max_tokens: 6, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = "", chunks = 0, usage = null;
  for await (const ev of stream) {
    if (ev.choices.length) text += ev.choices[0].text, chunks++;
    if (ev.usage) usage = ev.usage;
  }
  check(chunks >= 2, `${chunks} chunks`);
  check(text === plain.choices[0].text, `streamed ${JSON.stringify(text)} != ${JSON.stringify(plain.choices[0].text)}`);
  check(usage && usage.completion_tokens === 6, `usage ${JSON.stringify(usage)}`);
  console.log(`ok ${step}: ${chunks} chunks, usage ${usage.total_tokens} tokens`);

  step = "batch prompts";
  const b = await client.completions.create({ model, prompt: ["Once upon", "The dog"], max_tokens: 2, temperature: 0 });
  check(b.choices.length === 2 && b.choices[1].index === 1, JSON.stringify(b.choices));
  console.log(`ok ${step}`);

  step = "chat.completions.create logprobs";
  const messages = [
    { role: "developer", content: "Tell short stories." },
    { role: "user", content: [{ type: "text", text: "Tell me a story." }] },
  ];
  const cc = await client.chat.completions.create({
    model, messages, max_completion_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2,
  });
  const cm = cc.choices[0];
  check(typeof cm.message.content === "string" && cm.message.role === "assistant", JSON.stringify(cm));
  check(cm.logprobs && cm.logprobs.content.length === cc.usage.completion_tokens &&
        cm.logprobs.content.length >= 1, `logprobs ${JSON.stringify(cm.logprobs)}`);
  check(cm.logprobs.content.every((e) => e.top_logprobs.length === 2 && e.logprob <= 0), "top_logprobs");
  console.log(`ok ${step}: ${JSON.stringify(cm.message.content)}`);

  step = "chat.completions.stream";
  const cs = client.chat.completions.stream({ model, messages, max_completion_tokens: 5, temperature: 0 });
  let deltas = 0;
  cs.on("content", () => deltas++);
  const final = await cs.finalChatCompletion();
  check(deltas >= 1, `${deltas} content events`);
  check(final.choices[0].message.content === cm.message.content,
        `streamed ${JSON.stringify(final.choices[0].message.content)} != ${JSON.stringify(cm.message.content)}`);
  console.log(`ok ${step}: ${deltas} deltas`);

  step = "bad request";
  try {
    await client.completions.create({ model, prompt, max_tokens: 2, logit_bias: { "999999": 1 } });
    check(false, "no error");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400, `${e.constructor.name} ${e.status}`);
    check(e.code === null || typeof e.code === "string", `code ${JSON.stringify(e.code)}`);
  }
  console.log(`ok ${step}: BadRequestError`);

  step = "wrong key";
  const wrong = new OpenAI({ baseURL: base, apiKey: "sk-wrong", maxRetries: 0 });
  try {
    await wrong.completions.create({ model, prompt, max_tokens: 1 });
    check(false, "no error");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.code === "invalid_api_key",
          `${e.constructor.name} ${e.status} ${e.code}`);
  }
  console.log(`ok ${step}: AuthenticationError`);

  step = "unknown model";
  try {
    await client.models.retrieve("no-such-model");
    check(false, "no error");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError && e.code === "model_not_found", `${e.constructor.name} ${e.code}`);
  }
  console.log(`ok ${step}: NotFoundError`);
}

main().then(
  () => console.log("all SDK checks passed"),
  (e) => {
    console.log(`FAILED ${e.message}`);
    process.exit(1);
  },
);
