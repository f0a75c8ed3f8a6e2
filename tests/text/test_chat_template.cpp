// Chat templates (framework/text/chat_template.h, the interpreter in framework/text/jinja/) on
// hand-written templates: each construct's exact text (the expected texts are what Python's
// Jinja2 3.1 renders, set up as transformers sets it up: whitespace control with trim_blocks and
// lstrip_blocks, literals, operators, string methods, filters, tests, loops and the loop
// variable, scoping and namespaces, macros and call blocks, undefined values, containers, the
// template's variables, {% generation %}); template selection and special tokens from a tokenizer
// directory; and the errors: unsupported constructs, raise_exception, syntax errors with their
// line, the sandbox's refusals, and every bound of limits.h, each one input error of one line.
// tests/text/test_chat_template_vs_jinja2.py compares the real models' templates with Jinja2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/chat_template.h"
#include "framework/text/conversations.h"

namespace {

namespace fs = std::filesystem;
using gpt::Json;

struct Case {
  const char* tmpl;
  const char* expected;
};

const Json& conversation() {
  static const Json messages = Json::parse(R"([
    {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}])");
  return messages;
}

std::string render(const std::string& tmpl, bool generation_prompt = false,
                   const Json* tools = nullptr) {
  const gpt::ChatTemplate t(tmpl, Json{{"bos_token", "<s>"}, {"eos_token", "</s>"}},
                            "test template");
  return t.render(conversation(), tools, generation_prompt);
}

// The message of the input error `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const gpt::Error& e) {
    return e.what();
  }
  return "";
}

std::string render_error(const std::string& tmpl) {
  return error_of([&] { render(tmpl); });
}

template <size_t N>
void expect_texts(const Case (&cases)[N]) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tmpl);
    EXPECT_EQ(render(c.tmpl), c.expected);
  }
}

// What Python's Jinja2 3.1.2 renders for each template over conversation() with bos_token "<s>",
// eos_token "</s>", no tools and add_generation_prompt false.
const Case kWhitespace[] = {
    {"a\n{% if true %}\nb\n{% endif %}\nc", "a\nb\nc"},
    {"  {% if true %}x{% endif %}\n  {{ 'y' }}\n\t{# c #}\nz", "x  y\nz"},
    {"a  {%- if true -%}  b  {%- endif -%}  c", "abc"},
    {"{{ 'x' -}}   \n  {{- 'y' }}", "xy"},
    {"{% if true +%}\nkept\n{%+ endif %}", "\nkept\n"},
    {"{% raw %}{{ not evaluated }}{% endraw %}", "{{ not evaluated }}"},
    {"a\r\nb{% if true %}\r\nc{% endif %}\r\n", "a\nbc"},
    {"line\n", "line"},
    {"{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n",
     "  system\n  user\n  assistant\n  user\n"},
    {"{{ 'a' }}\n{% set x = 1 %}\n{{ 'b' }}", "a\nb"},
};

const Case kLiterals[] = {
    {"{{ 'it\\'s' }} {{ \"tab\\tx\" }} {{ '\\u00e9\\x41\\101' }} {{ 'a' 'b' }}",
     "it's tab\tx éAA ab"},
    {"{{ 1 }} {{ -3 }} {{ 1.0 }} {{ 0.1 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 2.5e-7 }} {{ 0x10 "
     "}} {{ 0o10 }} {{ 0b10 }} {{ 1_000 }}",
     "1 -3 1.0 0.1 1e+16 1000000000000000.0 1e-05 2.5e-07 16 8 2 1000"},
    {"{{ true }} {{ False }} {{ none }} {{ [1, 'a', none, [true]] }} {{ (1,) }} {{ (1, 'b') }} {{ "
     "{'k': 'v', 'n': 1.5} }}",
     "True False None [1, 'a', None, [True]] (1,) (1, 'b') {'k': 'v', 'n': 1.5}"},
};

const Case kOperators[] = {
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 8 }} {{ "
     "2 ** -1 }} {{ -2 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
     "3 -4 2 -2 3.5 2.0 256 0.5 4 3.0 0.5"},
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [0] * 2 }} {{ [1] + "
     "[2] }} {{ true + true }}",
     "7 9 a1None ababab [0, 0] [1, 2] 2"},
    {"{{ 1 < 2 < 3 }} {{ 2 < 1 < 3 }} {{ 1 == 1.0 }} {{ 'b' > 'a' }} {{ [1, 2] < [1, 3] }} {{ 'x' "
     "in 'xyz' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 0} }}",
     "True False True True True True True True"},
    {"{{ none or 'd' }} {{ 0 and 'x' }} {{ 'a' and 'b' }} {{ not '' }} {{ 'y' if 0 else 'n' }} [{{ "
     "'x' if false }}]",
     "d 0 b True n []"},
};

const Case kStrings[] = {
    {"{% set s = '  Hi, You!  ' %}[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ "
     "s.strip(' !H') }}]",
     "[Hi, You!][Hi, You!  ][  Hi, You!][i, You]"},
    {"{{ 'a,b,,c'.split(',') }} {{ 'a b  c '.split() }} {{ 'a,b,c'.rsplit(',', 1) }} {{ "
     "'a\\nb\\r\\nc'.splitlines() }}",
     "['a', 'b', '', 'c'] ['a', 'b', 'c'] ['a,b', 'c'] ['a', 'b', 'c']"},
    {"{{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} "
     "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'bc')) }}",
     "AB ab Hello World Hello True True"},
    {"{{ 'banana'.replace('a', 'o', 2) }} {{ 'banana'.find('n') }} {{ 'banana'.rfind('n') }} {{ "
     "'banana'.count('a') }} {{ '-'.join(['x', 'y']) }} {{ 'a=b'.partition('=') }}",
     "bonona 2 4 3 x-y ('a', '=', 'b')"},
    {"{% set s = 'héllo' %}{{ s[0] }}{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s|length }}",
     "ho|él|olléh|5"},
    {"{{ 'ß'|upper }} {{ 'ΣΑΣ.'|lower }} {{ ['é', '\\x00', '\\u200b'] }} {{ \"it's\" }} {{ "
     "[\"it's\"] }}",
     "SS σας. ['é', '\\x00', '\\u200b'] it's [\"it's\"]"},
    {"{{ '{} {}'.format('a', 1) }} {{ '{x:>4}'.format(x='b') }} {{ '%s=%d' % ('n', 3) }} {{ "
     "'%5.2f' % 3.14159 }}",
     "a 1    b n=3  3.14"},
};

const Case kFilters[] = {
    {"{{ '  x '|trim }}|{{ 'xax'|trim('x') }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize "
     "}}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 5|string }}",
     "x|a|Hello World|Hello|bba|5"},
    {"{{ '42'|int }} {{ '4.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '3.5'|float }} {{ -2|abs }} "
     "{{ 2.567|round(2) }} {{ 2.5|round }} {{ 2.1|round(0, 'ceil') }}",
     "42 4 0 7 3.5 2 2.57 2.0 3.0"},
    {"{{ missing|default('d') }} {{ ''|default('e', true) }} {{ [1, 2]|length }} {{ 'ab'|count }} "
     "{{ {'a': 1}|length }}",
     "d e 2 2 1"},
    {"{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'x'|center(5) }}|{{ 'one two "
     "three'|wordcount }}|{{ '<a>&'|e }}",
     "a\n  b\n\n  c|  a\n  b|  x  |3|&lt;a&gt;&amp;"},
    {"{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ [1, 2, "
     "2, 3]|unique|list }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}",
     "[1, 2, 3] ['A', 'a', 'b'] [3, 2, 1] [1, 2, 3] [3, 2, 1] cba"},
    {"{{ messages|map(attribute='role')|join(',') }} {{ messages|selectattr('role', 'equalto', "
     "'user')|list|length }} {{ messages|rejectattr('role', 'eq', "
     "'user')|map(attribute='role')|list }}",
     "system,user,assistant,user 2 ['system', 'assistant']"},
    {"{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', "
     "'x']|select|list }} {{ ['a', 'b']|map('upper')|join('-') }}",
     "[1, 3] [1, 3] [1, 'x'] A-B"},
    {"{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'a': "
     "1}|items|list }} {{ 'ab'|list }} {{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [3, 1, 2]|min }} {{ "
     "[3, 1, 2]|max }} {{ [1, 2, 3]|sum }}",
     "1 3 [('a', 2), ('b', 1)] [('a', 1)] ['a', 'b'] [[1, 2], [3, 4], [5]] 1 3 6"},
    {"{{ {'b': [1.5, none, true], 'a': 'é\"\\n'}|tojson }}|{{ {'b': 1, 'a': "
     "2}|tojson(sort_keys=true) }}|{{ [1, {'k': 'v'}]|tojson(indent=2) }}|{{ "
     "'é'|tojson(ensure_ascii=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}",
     "{\"b\": [1.5, null, true], \"a\": \"é\\\"\\n\"}|{\"a\": 2, \"b\": 1}|[\n  1,\n  {\n    "
     "\"k\": \"v\"\n  }\n]|\"\\u00e9\"|[1,2]"},
};

const Case kTests[] = {
    {"{{ 1 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ x is defined }} {{ x is undefined "
     "}} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ true is number }}",
     "True True True False True True True True True"},
    {"{{ 1 is integer }} {{ true is integer }} {{ 1.5 is float }} {{ true is boolean }} {{ {} is "
     "mapping }} {{ [] is sequence }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ 'abc' is lower "
     "}} {{ 'ABC' is upper }}",
     "True False True True True True True False True True"},
    {"{{ 1 is eq 1 }} {{ 1 is ne 1 }} {{ 1 is lt 2 }} {{ 1 is in [1] }} {{ 1 is not odd }} {{ "
     "raise_exception is callable }} {{ 'upper' is filter }} {{ 'odd' is test }}",
     "True False True True False True True True"},
};

const Case kLoops[] = {
    {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
     "}}{{ loop.length }}{{ loop.first|int }}{{ loop.last|int }} {% endfor %}",
     "1043410 2132400 3221400 4310401 "},
    {"{% for m in messages %}[{{ loop.previtem.role if loop.previtem is defined }}|{{ "
     "loop.nextitem.role if loop.nextitem is defined }}|{{ loop.cycle('a', 'b') }}]{% endfor %}",
     "[|user|a][system|assistant|b][user|user|a][assistant||b]"},
    {"{% for i in range(6) if i is even %}{{ i }}/{{ loop.length }} {% else %}none{% endfor %}|{% "
     "for i in [] %}x{% else %}empty{% endfor %}",
     "0/3 2/3 4/3 |empty"},
    {"{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% "
     "endif %}{{ i }}{% endfor %}",
     "023"},
    {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %} {% for a in [1, 2] %}{% "
     "for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{% endfor %}",
     "a1b2 11x 21y 12x 22y "},
    {"{% for x in [1, 1, 2] %}{{ loop.changed(x) }} {% endfor %}{% for i in range(2) %}{{ loop "
     "}}{% endfor %}",
     "True False True <LoopContext 1/2><LoopContext 2/2>"},
};

const Case kScoping[] = {
    {"{% set a = 'o' %}{% for x in [1, 2] %}{% set a = a ~ x %}{{ a }} {% endfor %}{{ a }}",
     "o1 o2 o"},
    {"{% set ns = namespace(total=0) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}{% "
     "endfor %}{{ ns.total }} {{ ns }}",
     "6 <Namespace {'total': 6}>"},
    {"{% set x, y = 1, 'b' %}{{ x }}{{ y }} {% set t %}text {{ x }}{% endset %}{{ t }} {% set u | "
     "upper %}loud{% endset %}{{ u }}",
     "1b text 1 LOUD"},
    {"{% if true %}{% set z = 5 %}{% endif %}{{ z }} {% with w = 3 %}{{ w }}{% endwith %}[{{ w }}] "
     "{% filter upper %}f{{ z }}{% endfilter %}",
     "5 3[] F5"},
    {"{% set d = dict(a=1, b=[2]) %}{{ d }} {{ dict([('k', 'v')]) }} {% print 'p', 1 %}",
     "{'a': 1, 'b': [2]} {'k': 'v'} p1"},
};

const Case kMacros[] = {
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ "
     "greet('B', '?') }} {{ greet(punct='.', name='C') }} {{ greet }}",
     "Hi A! Hi B? Hi C. <Macro 'greet'>"},
    {"{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }} {% macro r(n) %}{% "
     "if n %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}",
     "(1, 2){'k': 3} 321"},
    {"{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}in{% endcall %} {% macro "
     "twice(x) %}{{ caller(x) }}{{ caller(x * 2) }}{% endmacro %}{% call(y) twice(2) %}<{{ y }}>{% "
     "endcall %}",
     "[in] <2><4>"},
    {"{% set late = 'before' %}{% macro reads() %}{{ late }}{% endmacro %}{% set late = 'after' "
     "%}{{ reads() }} {% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}",
     "after []"},
};

const Case kUndefined[] = {
    {"[{{ missing }}][{{ missing|default('d') }}][{{ missing|length }}][{{ missing|list }}][{% for "
     "x in missing %}x{% endfor %}][{{ missing is defined }}]",
     "[][d][0][[]][][False]"},
    {"[{{ messages[0].nope }}][{{ messages[0].nope is defined }}][{{ missing ~ 'a' }}][{{ "
     "[missing] }}][{{ missing == missing }}][{{ none.attr }}][{{ messages.append }}]",
     "[][False][a][[Undefined]][True][][]"},
};

const Case kContainers[] = {
    {"{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ "
     "d.keys() }} {{ d.values() }} {{ d.items() }} {{ d.a }} {{ d['b'] }}",
     "1 None 0 dict_keys(['a', 'b']) dict_values([1, 2]) dict_items([('a', 1), ('b', 2)]) 1 2"},
    {"{% set l = [1, 2, 3] %}{{ l.index(2) }} {{ l.count(1) }} {{ l.pop() }} {{ l }} {{ l[5] }}[{{ "
     "l[1:] }}] {{ range(3) }} {{ range(10)[::3] }}",
     "1 1 3 [1, 2] [[2]] range(0, 3) range(0, 10, 3)"},
};

const Case kVariables[] = {
    {"{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ tools }}|{{ documents }}|{{ "
     "add_generation_prompt }}|{{ messages|length }}",
     "<s>|</s>|False|None|None|False|4"},
};

const Case kGeneration[] = {
    {"{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}<{{ m.content }}>{% "
     "endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
     "Be brief.Hi<Hello!>Bye"},
};

TEST(ChatTemplate, Whitespace) {
  expect_texts(kWhitespace);
}
TEST(ChatTemplate, Literals) {
  expect_texts(kLiterals);
}
TEST(ChatTemplate, Operators) {
  expect_texts(kOperators);
}
TEST(ChatTemplate, Strings) {
  expect_texts(kStrings);
}
TEST(ChatTemplate, Filters) {
  expect_texts(kFilters);
}
TEST(ChatTemplate, Tests) {
  expect_texts(kTests);
}
TEST(ChatTemplate, Loops) {
  expect_texts(kLoops);
}
TEST(ChatTemplate, Scoping) {
  expect_texts(kScoping);
}
TEST(ChatTemplate, Macros) {
  expect_texts(kMacros);
}
TEST(ChatTemplate, Undefined) {
  expect_texts(kUndefined);
}
TEST(ChatTemplate, Containers) {
  expect_texts(kContainers);
}
TEST(ChatTemplate, Variables) {
  expect_texts(kVariables);
}
TEST(ChatTemplate, Generation) {
  expect_texts(kGeneration);
}

TEST(ChatTemplate, GenerationPromptAndTools) {
  const std::string t =
      "{% if tools %}{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}"
      "{{ messages|length }}{% if add_generation_prompt %}<assistant>{% endif %}";
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(render(t), "4");
  EXPECT_EQ(render(t, true), "4<assistant>");
  EXPECT_EQ(render(t, true, &tools), "f;4<assistant>");
  const Json none;  // null: as no tools
  EXPECT_EQ(render("{{ tools is none }}", false, &none), "True");
}

// --- a tokenizer directory

class Directory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("chat_template_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::string render(const Json* tools = nullptr, const std::string& name = "") {
    return gpt::ChatTemplate(dir_.string(), name).render(conversation(), tools, false);
  }
  fs::path dir_;
};

TEST_F(Directory, SpecialTokensAsTransformersPassesThem) {
  write(
      "tokenizer_config.json",
      Json{{"chat_template",
            "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|"
            "{{ unk_token is defined }}|{{ additional_special_tokens }}|{{ image_token }}"},
           {"bos_token", {{"__type", "AddedToken"}, {"content", "<｜begin｜>"}, {"lstrip", false}}},
           {"eos_token", "</s>"},
           {"pad_token", nullptr},
           {"unk_token", ""},
           {"additional_special_tokens", {"<a>", {{"content", "<b>"}}}},
           {"extra_special_tokens", {{"image_token", "<img>"}}}}
          .dump());
  EXPECT_EQ(render(), "<｜begin｜>|</s>|False|False|['<a>', '<b>']|<img>");
  // special_tokens_map.json is read over tokenizer_config.json, as transformers does.
  write("special_tokens_map.json", R"({"eos_token": {"content": "<eos>"}, "pad_token": "<pad>"})");
  EXPECT_EQ(render(), "<｜begin｜>|<eos>|True|False|['<a>', '<b>']|<img>");
}

TEST_F(Directory, NamedTemplatesAndTheJinjaFile) {
  write("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "default {{ messages|length }}"},
    {"name": "tool_use", "template": "tools {{ tools|length }}"},
    {"name": "rag", "template": "rag"}]})");
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(render(), "default 4");
  EXPECT_EQ(render(&tools), "tools 1");
  EXPECT_EQ(render(nullptr, "rag"), "rag");
  EXPECT_EQ(error_of([&] { render(nullptr, "nope"); }),
            (dir_ / "tokenizer_config.json").string() + " has no chat template named \"nope\"");
  // chat_template.jinja takes priority over tokenizer_config.json, as in transformers.
  write("chat_template.jinja", "from the file\n");
  EXPECT_EQ(render(&tools), "from the file");
}

TEST_F(Directory, Errors) {
  EXPECT_EQ(error_of([&] { render(); }),
            dir_.string() +
                " has no chat template (no chat_template.jinja, and no "
                "\"chat_template\" in tokenizer_config.json)");
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"}]})");
  EXPECT_EQ(error_of([&] { render(); }), (dir_ / "tokenizer_config.json").string() +
                                             " has several chat templates and none named "
                                             "\"default\"");
  write("tokenizer_config.json", R"({"chat_template": 5})");
  EXPECT_EQ(error_of([&] { render(); }),
            (dir_ / "tokenizer_config.json").string() +
                ": chat_template must be a string or a list of {\"name\", \"template\"} (found 5)");
  write("tokenizer_config.json", R"({"chat_template": "{% for %}"})");
  EXPECT_EQ(error_of([&] { render(); }),
            (dir_ / "tokenizer_config.json").string() +
                ": chat template line 1: expected an expression, got '%}'");
  write("tokenizer_config.json", R"({"chat_template": "x", "bos_token": 1})");
  EXPECT_EQ(error_of([&] { render(); }),
            (dir_ / "tokenizer_config.json").string() +
                ": bos_token: expected a string or an object with a string \"content\" (found 1)");
  write("chat_template.jinja", "bad \xff byte");
  EXPECT_EQ(error_of([&] { render(); }),
            (dir_ / "chat_template.jinja").string() + ": not UTF-8 at byte 4");
}

// --- errors: one line each, naming the template line

TEST(ChatTemplate, UnsupportedConstructs) {
  EXPECT_EQ(render_error("a\n{{ messages|xmlattr }}"),
            "test template: chat template line 2: unsupported filter 'xmlattr'");
  EXPECT_EQ(render_error("{% include 'other.jinja' %}"),
            "test template: chat template line 1: unsupported tag 'include'");
  EXPECT_EQ(render_error("{{ 'a'.casefold() }}"),
            "test template: chat template line 1: unsupported method 'casefold' of str");
  EXPECT_EQ(render_error("{% for m in messages recursive %}{% endfor %}"),
            "test template: chat template line 1: unsupported recursive for loop");
  EXPECT_EQ(render_error("{{ cycler('a', 'b') }}"),
            "test template: chat template line 1: unsupported global function 'cycler'");
  EXPECT_EQ(render_error("{{ messages|map(attribute='role') }}"),
            "test template: chat template line 1: unsupported printing a generator (Python "
            "prints its address; use |list)");
  // Filters and tests Jinja2 does not have: refused when parsed, except inside an if.
  EXPECT_EQ(render_error("{{ 1|nosuch }}"),
            "test template: chat template line 1: no filter named \"nosuch\"");
  EXPECT_EQ(render("{% if false %}{{ 1|nosuch }}{% endif %}ok"), "ok");
  EXPECT_EQ(render_error("{% if true %}{{ 1|nosuch }}{% endif %}"),
            "test template: chat template line 1: no filter named \"nosuch\"");
}

TEST(ChatTemplate, Errors) {
  EXPECT_EQ(render_error("{{ raise_exception('Roles must alternate user/assistant') }}"),
            "test template: chat template line 1: raise_exception: Roles must alternate "
            "user/assistant");
  EXPECT_EQ(render_error("one\ntwo\n{{ nothing.attr }}"),
            "test template: chat template line 3: 'nothing' is undefined");
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(1) }}"),
            "test template: chat template line 1: access to attribute 'append' of 'list' "
            "object is unsafe.");
  EXPECT_EQ(render_error("{{ 'a' + 1 }}"),
            "test template: chat template line 1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("{{ 1 // 0 }}"),
            "test template: chat template line 1: integer division or modulo by zero");
  EXPECT_EQ(render_error("{% for x in 5 %}{% endfor %}"),
            "test template: chat template line 1: 'int' object is not iterable");
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "test template: chat template line 1: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(
      render_error("{{ nothing|tojson }}"),
      "test template: chat template line 1: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(render_error("{% break %}"),
            "test template: chat template line 1: 'break' outside a loop");
  EXPECT_EQ(render_error("{% for loop in [1] %}{% endfor %}"),
            "test template: chat template line 1: can't assign to the special loop variable in a "
            "for-loop target");
  EXPECT_EQ(render_error("x\n{% for m in messages %}"),
            "test template: chat template line 2: unexpected end of template: expected 'endfor' "
            "or 'else'");
  EXPECT_EQ(render_error("{# open"),
            "test template: chat template line 1: missing end of comment tag");
  EXPECT_EQ(render_error("{{ 'open }}"),
            "test template: chat template line 1: unterminated string");
  EXPECT_EQ(render_error("{{ (1] }}"),
            "test template: chat template line 1: unexpected ']', expected ')'");
  EXPECT_EQ(render_error("{% foo %}"), "test template: chat template line 1: unknown tag \"foo\"");
  EXPECT_EQ(render_error("{{ 'a\\x4' }}"),
            "test template: chat template line 1: string: truncated \\x escape");
  // A message quoting the template's text stays one line.
  const std::string multi_line = render_error("{{ raise_exception('a\\nb') }}");
  EXPECT_EQ(multi_line, "test template: chat template line 1: raise_exception: a\\x0ab");
}

// --- every bound of limits.h

TEST(ChatTemplate, Bounds) {
  EXPECT_EQ(
      render_error(std::string((1u << 20) + 1, 'x')),
      "test template: chat template: 1048577 bytes, more than the 1048576 a template may have");
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "{% if true %}";
  EXPECT_EQ(render_error(deep),
            "test template: chat template line 1: the template nests deeper than 64 levels");
  std::string high = "{{ a";
  for (int i = 0; i < 300; ++i) high += ".b";
  EXPECT_EQ(render_error(high + " }}"),
            "test template: chat template line 1: an expression nested deeper than 256");
  EXPECT_EQ(render_error("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}"),
            "test template: chat template line 1: macros nested deeper than 32 calls");
  EXPECT_EQ(render_error("{% for i in range(100000) %}{% for j in range(20) %}{% endfor %}"
                         "{% endfor %}"),
            "test template: chat template line 1: loops ran more than 1000000 iterations");
  EXPECT_EQ(
      render_error("{% for i in range(900) %}{% for j in range(1000) %}"
                   "{{ i + i + i + i + i + i + i + i + i + i + i + i }}{% endfor %}{% endfor %}"),
      "test template: chat template line 1: the template ran more than 20000000 steps");
  EXPECT_EQ(render_error("{{ 'x' * 20000000 }}"),
            "test template: chat template line 1: a repetition (*) longer than 16777216 bytes");
  EXPECT_EQ(render_error("{% for i in range(100) %}{{ 'x' * 200000 }}{% endfor %}"),
            "test template: chat template line 1: the rendered text is longer than 16777216 bytes");
  EXPECT_EQ(render_error("{% for i in range(40) %}{% set s = 'x' * 15000000 %}{% endfor %}"),
            "test template: chat template line 1: the template made more than 512 MiB of strings "
            "and lists");
  EXPECT_EQ(render_error("{% set ns = namespace(x=[]) %}{% for i in range(200) %}"
                         "{% set ns.x = [ns.x] %}{% endfor %}"),
            "test template: chat template line 1: a value nested deeper than 128");
  EXPECT_EQ(render_error("{{ range(200000)|length }}"),
            "test template: chat template line 1: range() of more than 100000 items");
}

// --- conversations (.jsonl lines)

TEST(Conversations, Accepted) {
  const gpt::Conversation c = gpt::parse_conversation(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
          {"role": "assistant", "content": null, "tool_calls": []}], "tools": [{"x": 1}], "id": 7})",
      "c.jsonl line 1");
  EXPECT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.tools.size(), 1u);
  EXPECT_TRUE(gpt::parse_conversation(R"({"messages": [{"role": "user"}]})", "w").tools.is_null());
}

TEST(Conversations, Refused) {
  auto refused = [](const std::string& text) {
    return error_of([&] { gpt::parse_conversation(text, "c.jsonl line 3"); });
  };
  EXPECT_EQ(refused("[1]"), "c.jsonl line 3: not a JSON object");
  EXPECT_EQ(refused("{\"messages\": "), "c.jsonl line 3: not valid JSON");
  EXPECT_EQ(refused(R"({"messages": []})"),
            "c.jsonl line 3: \"messages\" must be a non-empty array of messages");
  EXPECT_EQ(refused(R"({"messages": ["hi"]})"),
            "c.jsonl line 3: messages[0] must be an object (found a string)");
  EXPECT_EQ(refused(R"({"messages": [{"content": "x"}]})"),
            "c.jsonl line 3: messages[0] has no string \"role\"");
  EXPECT_EQ(refused(R"({"messages": [{"role": "user", "content": 5}]})"),
            "c.jsonl line 3: messages[0]: \"content\" must be a string, null or a list of parts "
            "(found 5)");
  EXPECT_EQ(refused(R"({"messages": [{"role": "user", "content": ["x"]}]})"),
            "c.jsonl line 3: messages[0]: \"content\" as a list holds objects (parts such as "
            "{\"type\": \"text\", \"text\": ...}), found a string");
  EXPECT_EQ(refused(R"({"messages": [{"role": "user"}], "tools": {}})"),
            "c.jsonl line 3: \"tools\" must be an array of tool schemas (found an object)");
}

TEST(ChatTemplate, ConversationValuesOutOfRange) {
  const gpt::ChatTemplate t("{{ messages }}", Json::object(), "test template");
  const Json big = Json::parse(R"([{"role": "user", "n": 18446744073709551615}])");
  EXPECT_EQ(error_of([&] { t.render(big, nullptr, false); }),
            "conversation: a JSON integer out of the 64-bit range");
}

}  // namespace
