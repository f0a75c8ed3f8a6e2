"""Python's Jinja2 set up exactly as transformers' apply_chat_template sets it up (its
_compile_jinja_template, restated: ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks,
the loopcontrols extension and the {% generation %} tag, its tojson filter, raise_exception and
strftime_now globals) and the special tokens it passes (special_tokens_map), for the tests that
compare the C++ chat templates and serve's chat prompts with it. Needs Debian's python3-jinja2."""
import datetime
import json

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag, as it renders without return_assistant_tokens_mask."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [],
                                      body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def compile_template(text):
    """transformers' _compile_jinja_template."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(text)


def special_tokens_map(config):
    """A tokenizer's special_tokens_map from its tokenizer_config.json, each token as its text
    (str() of an AddedToken is its content): the standard tokens that are set, the additional
    ones as a list, and the model's extra_special_tokens."""
    def text(v):
        return v["content"] if isinstance(v, dict) else v
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                "mask_token"):
        if config.get(key) and text(config[key]):
            out[key] = text(config[key])
    additional = [text(t) for t in config.get("additional_special_tokens") or []]
    if additional:
        out["additional_special_tokens"] = additional
    for key, value in (config.get("extra_special_tokens") or {}).items():
        if text(value):
            out[key] = text(value)
    return out
