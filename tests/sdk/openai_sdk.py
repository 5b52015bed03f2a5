"""The official OpenAI Python client against `qgate serve` (run by
tests/test_http.c): python openai_sdk.py BASE_URL API_KEY MODEL_ID PROMPT.
Prints one line per check; exits 1 at the first that fails."""
import sys

import openai
from openai import OpenAI

base, key, model, prompt = sys.argv[1:5]
client = OpenAI(base_url=base, api_key=key, max_retries=0)
step = ""


def check(cond, what):
    if not cond:
        print(f"FAILED {step}: {what}")
        sys.exit(1)


step = "models.list"
models = list(client.models.list())
check(len(models) == 1 and models[0].id == model, f"want [{model}], got {models}")
print(f"ok {step}: {models[0].id}")

step = "completions.create echo+logprobs"
c = client.completions.create(model=model, prompt=prompt, max_tokens=4, temperature=0, echo=True,
                              logprobs=2)
ch = c.choices[0]
lp = ch.logprobs
check(ch.text.startswith(prompt), repr(ch.text))
check(len(lp.tokens) == len(lp.token_logprobs) == len(lp.text_offset), "logprobs arrays differ")
check(c.usage.completion_tokens == 4, repr(c.usage))
print(f"ok {step}: {len(lp.tokens)} tokens")

step = "completions stream with logprobs"
plain = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0,
                                  logprobs=2)
stream = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0,
                                   logprobs=2, stream=True, stream_options={"include_usage": True})
text, toks, lps, tops, chunks, usage = "", [], [], [], 0, None
for ev in stream:
    if ev.usage:
        usage = ev.usage
    if not ev.choices:
        continue
    e = ev.choices[0]
    text += e.text
    if e.finish_reason is None:
        chunks += 1
        check(e.logprobs is not None, f"chunk {chunks} has no logprobs")
    if e.logprobs is not None:
        toks += e.logprobs.tokens
        lps += e.logprobs.token_logprobs
        tops += e.logprobs.top_logprobs
check(chunks >= 2, f"{chunks} chunks")
check(text == plain.choices[0].text, f"streamed {text!r} != {plain.choices[0].text!r}")
check(toks == plain.choices[0].logprobs.tokens, f"tokens {toks} != {plain.choices[0].logprobs.tokens}")
check(lps == plain.choices[0].logprobs.token_logprobs, "token_logprobs differ")
check(all(len(t) == 2 for t in tops), "top_logprobs")
check("".join(toks) == text, f"tokens {toks} do not spell {text!r}")
check(usage and usage.completion_tokens == 6, repr(usage))
print(f"ok {step}: {chunks} chunks, {len(toks)} log-probs")

step = "chat.completions.create logprobs"
messages = [{"role": "developer", "content": "Tell short stories."},
            {"role": "user", "content": [{"type": "text", "text": "Tell me a story."}]}]
cc = client.chat.completions.create(model=model, messages=messages, max_completion_tokens=5,
                                    temperature=0, logprobs=True, top_logprobs=2)
cm = cc.choices[0]
check(cc.id.startswith("chatcmpl-"), f"id {cc.id}")
check(cm.message.role == "assistant" and isinstance(cm.message.content, str), repr(cm))
content = cm.logprobs.content
check(len(content) == cc.usage.completion_tokens >= 1, repr(cm.logprobs))
check(all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in content), "top_logprobs")
check("".join(e.token for e in content) == cm.message.content,
      f"content {cm.message.content!r} != the log-prob tokens {[e.token for e in content]}")
print(f"ok {step}: {cm.message.content!r}")

step = "chat stream with logprobs"
cs = client.chat.completions.create(model=model, messages=messages, max_completion_tokens=5,
                                    temperature=0, logprobs=True, top_logprobs=2, stream=True)
text, entries, ids = "", [], set()
for ev in cs:
    ids.add(ev.id)
    if not ev.choices:
        continue
    e = ev.choices[0]
    text += e.delta.content or ""
    if e.logprobs is not None and e.logprobs.content:
        entries += e.logprobs.content
check(text == cm.message.content, f"streamed {text!r} != {cm.message.content!r}")
check([x.token for x in entries] == [x.token for x in content], "streamed log-prob tokens differ")
check([x.logprob for x in entries] == [x.logprob for x in content], "streamed log-probs differ")
check(len(ids) == 1 and next(iter(ids)).startswith("chatcmpl-"), f"ids {ids}")
print(f"ok {step}: {len(entries)} log-probs")

step = "bad request"
try:
    client.completions.create(model=model, prompt=prompt, max_tokens=2, logit_bias={"999999": 1})
    check(False, "no error")
except openai.BadRequestError as e:
    check(e.status_code == 400, repr(e))
print(f"ok {step}: BadRequestError")

step = "wrong key"
try:
    OpenAI(base_url=base, api_key="sk-wrong", max_retries=0).completions.create(
        model=model, prompt=prompt, max_tokens=1)
    check(False, "no error")
except openai.AuthenticationError as e:
    check(e.code == "invalid_api_key", repr(e))
print(f"ok {step}: AuthenticationError")

step = "unknown model"
try:
    client.models.retrieve("no-such-model")
    check(False, "no error")
except openai.NotFoundError as e:
    check(e.code == "model_not_found", repr(e))
print(f"ok {step}: NotFoundError")
print(f"all Python SDK checks passed (openai {openai.__version__})")
