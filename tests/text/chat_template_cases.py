"""Chat templates for test_chat_template_vs_jinja2.py: CONSTRUCTS, hand-written, use every construct
the C++ interpreter supports (each must render as Jinja2 renders it), ERRORS are templates Jinja2
refuses or fails on (each must fail in C++ too); random_templates() and whitespace_templates()
make random ones from a seed (typed expressions and statements; text and tags with every kind of
whitespace control), rendered alike or failing alike. They read `messages`, `tools`, the special
tokens and literals."""
import random

CONSTRUCTS = {
    # --- whitespace: trim_blocks, lstrip_blocks, '-' and '+', raw, newlines
    "ws_blocks": "a\n{% if true %}\nb\n{% endif %}\nc\n  {% for m in messages %}\n  - {{ m.role }}\n"
                 "  {% endfor %}\nend\n",
    "ws_lstrip": "  {% if true %}x{% endif %}  \n    {%+ if true %}y{% endif %}\n\t{# c #}\nz\n"
                 "  {{ 'var keeps' }}\n  {% set q = 1 %}\nq",
    "ws_minus": "a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e {#- x -#} f\n\n"
                "{{- 'g' }}\n  {%- if true %}h{% endif -%}\n\n  i",
    "ws_plus": "{% if true +%}\nkeep\n{%+ endif %}\n{% if true %}{% endif +%}\nnext",
    "ws_raw": "{% raw %}\n  {{ not evaluated }} {% if %}\n{% endraw %}\nafter {%- raw -%}  x  "
              "{%- endraw %}  y",
    "ws_crlf": "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\rd\r\n\r\n",
    "ws_comments": "{# one #}\n{# two\nlines #}\nthree {#- four -#}   five\n  {# six #}\nseven",
    "ws_unicode": "a\u3000\u00a0{%- if true %}b{% endif %}\u2003{% if true -%}\u2002c{% endif %}\n"
                  "\u00a0 {% if true %}d{% endif %}",
    "ws_line_start": "{% if true %}{% endif %}  {% if true %}x{% endif %}\n{% if true %}\n"
                     "  {% if true %}y{% endif %}\n{% endif %}\n{{ 'v' }}  {% if true %}z{% endif %}",
    "ws_trailing": "text\n\n",
    # --- literals and printing
    "literals": "{{ 'a\\n\\'b\\\\' }}|{{ \"q\\\"\" }}|{{ 1 }}|{{ 1.0 }}|{{ 1e20 }}|{{ 1e16 }}|"
                "{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 0.1 + 0.2 }}|{{ 1_000 }}|{{ 0x1F }}|"
                "{{ 0o17 }}|{{ 0b101 }}|{{ true }}|{{ True }}|{{ none }}|{{ None }}|"
                "{{ [1, 'a', none, 1.5, [2], \"it's\"] }}|{{ (1,) }}|{{ (1, 2) }}|{{ () }}|"
                "{{ {'a': 1, 'b': [True]} }}|{{ '\\u00e9\\x41\\101\\q' }}|{{ 'a' 'b' }}|"
                "{{ -0.0 }}|{{ 1.5e-7 }}|{{ 123456789.125 }}|{{ 'x', 1 }}",
    "arithmetic": "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ -7.5 // 2 }} "
                  "{{ 7.5 % 2 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -2 }} {{ -2 ** 2 }} "
                  "{{ 3 * 'ab' }} {{ 'ab' * 0 }} {{ [1] * 3 }} {{ 'a' ~ 1 ~ none ~ 1.5 }} "
                  "{{ 1 + 2 * 3 - 4 }} {{ 10 / 4 * 2 }} {{ 1 + 1.5 }} {{ true + 1 }} "
                  "{{ -(3) }} {{ +4 }} {{ 2 ** 0.5 }} {{ 10 // 3.0 }} {{ [1] + [2] }} "
                  "{{ (1,) + (2,) }} {{ 'a' + 'b' }} "
                  # Jinja2 folds a constant base and writes it unparenthesised: -(2 ** n)
                  "{% set n = 2 %}{{ -2 ** n }} {{ (-2.0) ** n }} {{ (1 - 3) ** n }} "
                  "{{ (-2) ** ('aa'|length) }} {{ (-1) ** ('a'.ljust(2)|count) }}",
    "logic": "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 'a' in 'abc' }} "
             "{{ 2 not in [1] }} {{ 'k' in {'k': 1} }} {{ none or 'x' }} {{ 0 and 1 }} "
             "{{ '' or [] }} {{ not 0 }} {{ not not 'x' }} {{ 'a' if false }}|"
             "{{ 'y' if 1 else 'n' }} {{ [1, 2] < [1, 3] }} {{ (1,) == [1] }} {{ 'b' >= 'a' }} "
             "{{ 1 <= 1 }} {{ true == 1 }} {{ none == none }} {{ {'a': 1} == {'a': 1.0} }} "
             "{{ 1 if none is none else 2 }} {{ 'x' if 'q' in tools|string else 'no tools' }}",
    # --- strings
    "str_methods": "{% set s = '  Hello, World!  ' %}{{ s.strip() }}|{{ s.lstrip() }}|"
                   "{{ s.rstrip() }}|{{ s.strip(' !H') }}|{{ s.split() }}|{{ s.split(',') }}|"
                   "{{ 'a,b,,c'.split(',', 1) }}|{{ 'a b c'.rsplit(None, 1) }}|"
                   "{{ 'a,b,c'.rsplit(',', 1) }}|{{ s.upper() }}|{{ s.lower() }}|"
                   "{{ 'hello wORLD'.title() }}|{{ 'hELLO'.capitalize() }}|"
                   "{{ s.startswith('  He') }}|{{ s.endswith(('x', '!  ')) }}|"
                   "{{ s.replace('l', 'L', 2) }}|{{ s.find('o') }}|{{ s.rfind('o') }}|"
                   "{{ s.find('o', 7) }}|{{ s.count('l') }}|{{ '-'.join(['a', 'b']) }}|"
                   "{{ 'x'.center(6, '*') }}|{{ 'ab\\ncd\\r\\nef'.splitlines() }}|"
                   "{{ 'ab\\ncd'.splitlines(true) }}|{{ 'a=b=c'.partition('=') }}|"
                   "{{ 'a=b=c'.rpartition('=') }}|{{ '42'.zfill(5) }}|{{ '-4'.zfill(4) }}|"
                   "{{ '3'.isdigit() }}|{{ 'abc'.isalpha() }}|{{ ' '.isspace() }}|"
                   "{{ 'prefix-x'.removeprefix('prefix-') }}|{{ 'x.txt'.removesuffix('.txt') }}|"
                   "{{ 'abc'.index('c') }}|{{ 'ab'.ljust(4, '.') }}|{{ 'ab'.rjust(4) }}|"
                   "{{ 'AbC'.islower() }}|{{ 'ABC'.isupper() }}|{{ ''.split(',') }}|"
                   "{{ '  '.split() }}|{{ 'aXbXc'.split('X', -1) }}|{{ 'é'.isascii() }}",
    "indexing": "{% set s = 'héllo' %}{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[::2] }}|"
                "{% set l = [1, 2, 3, 4, 5] %}{{ l[1:] }}{{ l[:-2] }}{{ l[::-1] }}{{ l[-2:] }}"
                "{{ l[10:] }}{{ l[1:4:2] }}{{ l[5] }}{{ l[-9] }}{{ l[3:1] }}{{ l[-1:0:-2] }}|"
                "{{ range(10)[2:8:3] }}{{ range(5)[::-1] }}{{ range(3)[1] }}|"
                "{{ messages[0].role }}{{ messages[0]['content'] }}{{ messages.0.role }}"
                "{{ messages[-1]['role'] }}{{ messages[1:2]|length }}|{{ (1, 2, 3)[1:] }}|"
                "{{ l[true] }}{{ l['x'] }}{{ s[1.5] }}{{ {'a': 1}['b'] }}{{ {1: 'int'}[1.0] }}",
    # --- filters
    "text_filters": "{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|"
                    "{{ 'hello world-foo(bar<baz'|title }}|{{ 'hELLO wORLD'|capitalize }}|"
                    "{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'aaa'|replace('', '-') }}|{{ 42|string }}|"
                    "{{ '42'|int }}|{{ '4.7'|int }}|{{ 'x'|int(7) }}|{{ '0x1A'|int(0, 16) }}|"
                    "{{ ' 1_000 '|int }}|{{ 3.99|int }}|{{ none|int }}|{{ '3.5'|float }}|"
                    "{{ 'nan'|float }}|{{ 'x'|float(1.5) }}|{{ -3|abs }}|{{ -2.5|abs }}|"
                    "{{ 2.567|round(2) }}|{{ 2.5|round }}|{{ 3.5|round }}|{{ 0.125|round(2) }}|"
                    "{{ 2.567|round(1, 'floor') }}|{{ 2.561|round(2, 'ceil') }}|{{ 3|round }}|"
                    "{{ undefined_var|default('d') }}|{{ ''|default('e', true) }}|"
                    "{{ none|default('n') }}|{{ none|d('n', true) }}|{{ [1, 2, 3]|length }}|"
                    "{{ 'héllo'|count }}|{{ {'a': 1}|length }}|{{ 'a\\nb\\n\\nc'|indent(2) }}|"
                    "{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}|"
                    "{{ '\\nx'|indent(first=true) }}|{{ 'x'|center(8) }}|"
                    "{{ 'one two, three_four'|wordcount }}|{{ '<a href=\"x\">&'|e }}|"
                    "{{ '<b>'|safe }}|{{ '<b>'|escape|escape }}|{{ '<i>'|forceescape }}|"
                    "{{ '%s-%d-%05.2f'|format('a', 3, 2.5) }}|{{ '%(x)s'|format(x=1) }}|"
                    "{{ 'hello world'|truncate(8) }}|{{ 'hello world'|truncate(8, true) }}|"
                    "{{ 'hello'|truncate(3, true, '.', 0) }}|{{ messages[0]|attr('role') }}",
    "tojson": "{{ messages|tojson }}|{{ {'b': 1, 'a': [1.5, none, true, 'é\"\\n\\t\\u0001']}|tojson }}|"
              "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1, {'x': 'y'}]|tojson(indent=2) }}|"
              "{{ {'a': [], 'b': {}}|tojson(indent=4) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|"
              "{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ 1e100|tojson }}|{{ tools|tojson }}|"
              "{{ {1: 'i', 2.5: 'f', true: 'b', none: 'n'}|tojson }}|{{ (1, 2)|tojson }}|"
              "{{ 'x'|tojson(indent='\\t') }}|{{ [[1]]|tojson(indent='--') }}|"
              "{{ 10**20 if false else 12345678901234|tojson }}|{{ 0.1|tojson }}|"
              "{{ tools|tojson(indent=4) if tools else 'none' }}",
    "sequence_filters": "{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a']|sort }}|"
                        "{{ ['b', 'A', 'a']|sort(case_sensitive=true) }}|"
                        "{{ [3, 1, 2]|sort(reverse=true) }}|"
                        "{{ messages|sort(attribute='role')|map(attribute='role')|join(',') }}|"
                        "{{ messages|map(attribute='role')|join(',') }}|"
                        "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|"
                        "{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}|"
                        "{{ messages|selectattr('tool_calls')|list|length }}|"
                        "{{ messages|selectattr('tool_calls', 'defined')|list|length }}|"
                        "{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('even')|list }}|"
                        "{{ [0, 1, '', 2]|select|list }}|{{ [1, 2, 2, 'a', 'A', 1.0, true]|unique|list }}|"
                        "{{ ['a', 'A']|unique(case_sensitive=true)|list }}|{{ [1, 2, 3]|reverse|list }}|"
                        "{{ 'abc'|reverse }}|{{ [1, 2, 3]|first }}|{{ [1, 2, 3]|last }}|"
                        "{{ []|first }}|{{ {'b': 1, 'a': 2}|dictsort }}|"
                        "{{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}|"
                        "{{ {'a': 1}|items|list }}|{{ 'ab'|list }}|{{ {'k': 1}|list }}|"
                        "{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ [1, 2, 3, 4, 5]|batch(2, 0)|list }}|"
                        "{{ [1, 2, 3, 4, 5]|slice(2)|list }}|{{ [1, 2, 3, 4]|slice(3, 'f')|list }}|"
                        "{{ [3, 1, 2]|min }}|{{ [3, 1, 2]|max }}|{{ ['b', 'A']|min }}|{{ []|max }}|"
                        "{{ [1, 2, 3]|sum }}|{{ [{'n': 1}, {'n': 2}]|sum(attribute='n') }}|"
                        "{{ ['a', 'b']|map('upper')|join }}|{{ [{'a': {'b': 1}}]|map(attribute='a.b')|list }}|"
                        "{{ [{'a': 1}, {}]|map(attribute='a', default=0)|list }}|"
                        "{{ [[1, 2]]|map(attribute='1')|list }}|{{ [1, 2, 3]|join(', ') }}|"
                        "{{ [1, 2]|join(attribute='x') }}|{{ ['x', 'y']|map('replace', 'x', 'z')|list }}|"
                        "{{ [3, 1]|sort|first }}|{{ {'a': 1}.items()|first }}",
    "tests": "{{ 1 is odd }}{{ 2 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}"
             "{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ true is boolean }}"
             "{{ 1 is boolean }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}"
             "{{ 1.0 is float }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is sequence }}"
             "{{ {} is sequence }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ x is iterable }}"
             "{{ x is sequence }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 1 is eq 1 }}"
             "{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 1 is le 1 }}{{ 1 is ge 2 }}"
             "{{ 1 is in [1] }}{{ none is sameas none }}{{ messages is iterable }}"
             "{{ 'upper' is filter }}{{ 'odd' is test }}{{ 'nope' is filter }}{{ true is true }}"
             "{{ false is false }}{{ 1 is true }}{{ raise_exception is callable }}"
             "{{ 'x' is callable }}{{ 1 is not odd }}{{ not 1 is odd }}{{ 2 is equalto 2 }}"
             "{{ 3 is greaterthan 2 }}{{ 2 is lessthan 3 }}{{ 'a' is escaped }}"
             "{{ 'a'|e is escaped }}{{ messages[0] is mapping }}{{ range(2) is sequence }}"
             "{{ (x is nosuchtest) if false else 'skipped' }}",
    # --- statements
    "loops": "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/"
             "{{ loop.revindex0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }}/"
             "{{ loop.previtem.role if loop.previtem is defined }}/"
             "{{ loop.nextitem.role if loop.nextitem is defined }}/{{ loop.cycle('a', 'b') }}/"
             "{{ loop.depth }}{{ loop.depth0 }};{% endfor %}|"
             "{% for i in range(5) if i is odd %}{{ i }}{{ loop.length }}{% else %}none{% endfor %}|"
             "{% for i in [] %}x{% else %}empty{% endfor %}|"
             "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}|"
             "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
             "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|"
             "{% for c in 'ab' %}{{ c }}{% endfor %}|{% for a in [1, 2] %}{% for b in [3, 4] %}"
             "{{ loop.index }}{{ a }}{{ b }} {% endfor %}{% endfor %}|"
             "{% for x in [1, 1, 2] %}{{ loop.changed(x) }}{% endfor %}|"
             "{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %}|"
             "{% for x in range(3) %}{{ loop }}{% endfor %}|"
             "{% for x in range(1, 10, 4) %}{{ x }}{% endfor %}|{{ range(3) }}{{ range(0, 9, 2) }}",
    "scoping": "{% set a = 'o' %}{% for x in [1, 2] %}{% set a = a ~ x %}{{ a }}{% endfor %}{{ a }}|"
               "{% set ns = namespace(n=0, items=[]) %}{% for x in [1, 2, 3] %}"
               "{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}|{% set x, y = 1, 2 %}{{ x }}{{ y }}|"
               "{% set block %}inner {{ a }}{% endset %}{{ block }}|"
               "{% set up | upper %}shout{% endset %}{{ up }}|"
               "{% if true %}{% set z = 5 %}{% endif %}{{ z }}|{% with w = 3 %}{{ w }}{% endwith %}"
               "{{ w }}|{% filter upper %}filtered {{ a }}{% endfilter %}|{{ ns }}|"
               "{% print 'p', 1 %}|{% for i in [1] %}{% set inner = 1 %}{% endfor %}{{ inner }}|"
               "{% set ns2 = namespace({'n': 7}, m=8) %}{{ ns2.n }}{{ ns2.m }}|{% set d = dict(a=1, b=[2]) %}{{ d }}|"
               "{{ dict([('k', 'v')]) }}|{% set loop = 'top' %}{{ loop }}",
    "macros": "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}|"
              "{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}|"
              "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}"
              "{{ rec(3) }}|{% macro c() %}[{{ caller() }}]{% endmacro %}"
              "{% call c() %}inside{% endcall %}|{% macro c2(x) %}{{ caller(x * 2) }}{% endmacro %}"
              "{% call(y) c2(21) %}{{ y }}{% endcall %}|{{ greet }}|"
              "{% macro m(a, b=a ~ 'x') %}{{ a }}{{ b }}{% endmacro %}{{ m('q') }}|"
              "{% macro miss(a) %}[{{ a }}]{% endmacro %}{{ miss() }}|"
              "{% set late = 'early' %}{% macro reads() %}{{ late }}{% endmacro %}"
              "{% set late = 'late' %}{{ reads() }}|{{ greet('D')|upper }}|"
              "{% macro roles(ms) %}{% for m in ms %}{{ m.role }} {% endfor %}{% endmacro %}"
              "{{ roles(messages) }}",
    "containers": "{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }}{{ d.get('z') }}"
                  "{{ d.get('z', 0) }}{{ d.keys() }}{{ d.values() }}{{ d.items() }}"
                  "{{ d.keys()|list }}{{ d['a'] }}{{ d.a }}{{ d.z is defined }}{{ 'a' in d.keys() }}|"
                  "{% set l = [1, 2, 3] %}{{ l.index(2) }}{{ l.count(1) }}{{ l.pop() }}{{ l }}"
                  "{{ l.pop(0) }}{{ l }}|{{ messages[0].items()|list|length }}|"
                  "{{ messages[0].keys()|list }}|{{ d.copy() }}|{{ l.copy() }}",
    "generation": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
                  "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n"
                  "{% endfor %}",
    "formatting": "{{ '{} and {}'.format('a', 'b') }}|{{ '{1}{0}'.format('a', 'b') }}|"
                  "{{ '{x}!'.format(x=1) }}|{{ '{:>5}|{:<5}|{:^5}'.format('a', 'b', 'c') }}|"
                  "{{ '{:05d}'.format(42) }}|{{ '{:.2f}'.format(3.14159) }}|{{ '{!r}'.format('q') }}|"
                  "{{ '{:+d}'.format(5) }}|{{ '{:*^9}'.format('mid') }}|{{ '{{literal}}'.format() }}|"
                  "{{ '{0[role]}'.format(messages[0]) }}|{{ '{:8.3f}|'.format(-2.5) }}|"
                  "{{ '{:x}'.format(255) }}|{{ '{:5}|'.format(7) }}|{{ '{:5}|'.format(1.5) }}|"
                  "{{ '%s and %r' % ('a', 'b') }}|{{ '%5s|%-5s|' % ('a', 'b') }}|"
                  "{{ '%.3s' % 'abcdef' }}|{{ '%x %X %o' % (255, 255, 8) }}|{{ '%e' % 12345.678 }}|"
                  "{{ '%g' % 0.00001 }}|{{ '%d%%' % 50 }}|{{ '%+d' % 3 }}|{{ '%05d' % -3 }}|"
                  "{{ '%s' % [1, 2] }}|{{ '%(a)s-%(b)d' % {'a': 'x', 'b': 2} }}|{{ '%i' % 3.9 }}",
    "strftime": "{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %B %Y') }}|"
                "{{ strftime_now('%A %j %U %a %b %y %m') }}|{{ strftime_now('') }}|"
                "{{ strftime_now('100%%') }}",
    "variables": "{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ unk_token is defined }}|"
                 "{{ pad_token is defined }}|{{ additional_special_tokens }}|{{ documents }}|"
                 "{{ tools is none }}|{{ add_generation_prompt }}|{{ messages|length }}",
    "undefined": "{{ nothing }}|{{ nothing|default('d') }}|{{ nothing|length }}|{{ nothing|list }}|"
                 "{% for x in nothing %}x{% endfor %}|{{ nothing is defined }}|"
                 "{{ messages[0].nothing }}|{{ messages[0].nothing is defined }}|"
                 "{{ nothing ~ 'a' }}|{{ nothing == nothing }}|{{ [nothing] }}|"
                 "{{ nothing|string }}|{{ nothing|trim }}|{{ nothing|upper }}|{{ nothing|first }}|"
                 "{{ nothing|last }}|{{ nothing|join }}|{{ 'x' in nothing }}|"
                 "{{ nothing|items|list }}|{{ messages.append }}|{{ nothing|reverse|list }}|"
                 "{{ nothing is none }}|{{ nothing != 1 }}|{{ nothing or 'or' }}|"
                 "{{ none.attr }}|{{ none['k'] }}|{{ 5.attr }}|{{ nothing|safe }}|"
                 "{{ messages[0].__class__ }}|{{ nothing|wordcount }}|{{ nothing|e }}",
    "unicode": "{{ 'ß'|upper }}|{{ 'İ'|lower }}|{{ 'ΣΑΣ ΣΑΣ.'|lower }}|{{ 'ǆemal'|capitalize }}|"
               "{{ 'éa ŉx'|title }}|{{ ['é', '日本', '\\x00\\x7f\\u200b\\U0001f600\\xa0', \"'\\\"\"] }}|"
               "{{ 'ﬁ'|upper }}|{{ '\\u00a0x\\u3000'|trim }}|{{ 'a\\u2028b\\x1cc\\x85d'.splitlines() }}|"
               "{{ '١٢'|int }}|{{ '٣.٥'|float }}|{{ 'ǅ'.lower() }}|{{ 'ŉ'.title() }}|"
               "{{ 'ΑΣ'.lower() }}|{{ 'aΣ b'.lower() }}|{{ 'Ǆ'|title }}|{{ '𝐀'|lower }}|"
               "{{ 'ÉCOLE é'|wordcount }}|{{ '\\u0345'|upper }}",
    "content_walk": "{% for m in messages %}{% if m.content is string %}{{ m.content|trim }}"
                    "{% elif m.content is none %}(none){% else %}{% for p in m.content %}"
                    "{{ p.text if p.type == 'text' else '<' ~ p.type ~ '>' }}{% endfor %}"
                    "{% endif %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
                    "[{{ c.function.name }}({{ c.function.arguments|tojson }})]{% endfor %}"
                    "{% endif %}\n{% endfor %}{% if add_generation_prompt %}>{% endif %}",
}

ERRORS = {
    "raise": "{{ raise_exception('custom message: ' ~ messages|length) }}",
    "undefined_attribute": "{{ nothing.attr }}",
    "undefined_call": "{{ nothing() }}",
    "append": "{% set l = [] %}{{ l.append(1) }}",
    "dict_update": "{% set d = {} %}{{ d.update({'a': 1}) }}",
    "syntax": "{% if %}x{% endif %}",
    "unclosed_for": "{% for x in messages %}",
    "unclosed_print": "{{ 'x' ",
    "unknown_filter": "{{ messages|nosuchfilter }}",
    "unknown_test": "{{ messages is nosuchtest }}",
    "type_error": "{{ 'a' + 1 }}",
    "division_by_zero": "{{ 1 / 0 }}",
    "break_outside_loop": "{% break %}",
    "unknown_tag": "{% foo %}",
    "macro_arguments": "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "macro_keyword": "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}",
    "tojson_undefined": "{{ nothing|tojson }}",
    "range_too_big": "{{ range(200000)|length }}",
    "namespace_assignment": "{% set d = {} %}{% set d.x = 1 %}",
    "not_iterable": "{% for x in 5 %}{% endfor %}",
    "unpack": "{% for a, b in [[1, 2, 3]] %}{% endfor %}",
    "loop_target": "{% for loop in [1] %}{% endfor %}",
    "unclosed_comment": "{# unclosed",
    "unterminated_string": "{{ 'unterminated }}",
    "compare_types": "{{ 1 < 'a' }}",
    "generator_length": "{{ messages|selectattr('role')|length }}",
    "last_of_generator": "{{ messages|map(attribute='role')|last }}",
    "undefined_arithmetic": "{{ nothing + 1 }}",
    "undefined_item": "{{ nothing[0] }}",
    "int_infinity": "{{ 'inf'|int }}",
    "string_escape": "{{ '\\x4' }}",
    "bracket_mismatch": "{{ (1] }}",
    "empty_separator": "{{ 'a'.split('') }}",
    "sort_mixed": "{{ [1, 'a']|sort }}",
    "str_index": "{{ 'abc'.index('z') }}",
    "pop_empty": "{{ [].pop() }}",
    "format_arguments": "{{ '%s %s' % ('a',) }}",
    "test_takes_if_as_argument": "{{ x is defined if true else 1 }}",
}


# ---- random templates: typed expressions (str, number, bool, list) in statements

S_LIT = ["'a'", "''", "' x '", "'Hello World'", "'a,b,,c'", "'ß'", "'日本 語'", "'\\n x\\t'", "'ΣΑΣ'",
         "'<b>&'", "'İi'", "'ǅx'", "'-_-'", "'  '", "m.role", "m.content|string", "bos_token", "'42'",
         "'4.5'", "'x\\u00a0y'"]
S_FILTERS = ['trim', 'upper', 'lower', 'capitalize', 'title', 'string', 'reverse', 'e', 'safe', 'center', 'indent']
S_METHODS = ['strip()', 'lstrip()', 'rstrip()', 'upper()', 'lower()', 'title()', 'capitalize()',
             'replace("a", "b")', 'lstrip("a ")', 'zfill(6)', 'center(7, "*")', 'ljust(4)', 'removeprefix("a")']
SLICES = ['0', '-1', '1:', '::-1', ':2', '1:3', '::2', '5']
TOJSON = ['tojson', 'string', 'tojson(indent=2)', 'tojson(sort_keys=true)', 'tojson(ensure_ascii=true)']
JOINS = ["", "', '", "'-'"]
N_LIT = ["0", "1", "2", "-1", "3", "1.5", "0.1", "-2.5", "10", "1e3", "7", "true", "messages|length"]
N_OPS = ['+', '-', '*', '/', '//', '%']  # no **: Python's complex and unbounded ints
N_SFILT = ['length', 'count', 'int', 'float', 'wordcount']
N_NFILT = ['abs', 'round', 'int', 'float', 'round(1)', 'round(1, "floor")']
N_SMETH = ['find("a")', 'count("a")', 'rfind(" ")']
N_AGG = ['sum', 'min', 'max', 'first', 'last']
B_LIT = ["true", "false", "add_generation_prompt", "m.tool_calls is defined"]
TESTS = ['defined', 'none', 'string', 'number', 'integer', 'float', 'mapping', 'iterable', 'sequence', 'boolean', 'lower', 'upper', 'true', 'false']
L_LIT = ["[]", "[1, 2, 3]", "['b', 'a', 'B']", "messages", "tools or []", "[1, 'a']", "range(4)|list", "[3, 1, 2]", "[none, 0, '']"]
L_SMETH = ['split()', 'split(",")', 'rsplit(" ", 1)', 'splitlines()']
L_FILT = ['sort', 'reverse|list', 'unique|list', 'list', 'select|list', 'reject|list', 'batch(2)|list', 'slice(2)|list']
L_MSG = ['map(attribute="role")|list', 'selectattr("role", "equalto", "user")|list', 'rejectattr("content")|list',
         'map(attribute="content")|map("string")|list', 'sort(attribute="role")|list']
L_SLICE = ['1:', '::-1', ':2', '-2:']
PRE = ["", " ", "\n", "  \n  ", "x", "\t"]
POST = ["", "\n", " ", "\n\n"]

class Gen:
    def __init__(self, rng): self.r = rng
    def c(self, xs): return self.r.choice(xs)
    def s(self, d=0):
        r = self.r.random()
        if d > 2 or r < 0.3: return self.c(S_LIT)
        if r < 0.45: return "(" + self.s(d+1) + "|" + self.c(S_FILTERS) + ")"
        if r < 0.55: return "(" + self.s(d+1) + ")." + self.c(S_METHODS)
        if r < 0.63: return "(" + self.s(d+1) + " ~ " + self.any(d+1) + ")"
        if r < 0.7: return "(" + self.s(d+1) + " + " + self.s(d+1) + ")"
        if r < 0.77: return "(" + self.s(d+1) + ")[" + self.c(SLICES) + "]"
        if r < 0.84: return "(" + self.any(d+1) + "|" + self.c(TOJSON) + ")"
        if r < 0.9: return "(" + self.l(d+1) + "|join(" + self.c(JOINS) + "))"
        if r < 0.95: return "(" + self.s(d+1) + " if " + self.b(d+1) + " else " + self.s(d+1) + ")"
        return "'{}-{}'.format(" + self.any(d+1) + ", " + self.any(d+1) + ")"
    def n(self, d=0):
        r = self.r.random()
        if d > 2 or r < 0.35: return self.c(N_LIT)
        if r < 0.6: return "(" + self.n(d+1) + " " + self.c(N_OPS) + " " + self.n(d+1) + ")"
        if r < 0.7: return "(" + self.s(d+1) + "|" + self.c(N_SFILT) + ")"
        if r < 0.78: return "(" + self.l(d+1) + "|" + self.c(['length', 'count']) + ")"
        if r < 0.86: return "(" + self.n(d+1) + "|" + self.c(N_NFILT) + ")"
        if r < 0.93: return "(" + self.s(d+1) + ")." + self.c(N_SMETH)
        return "([" + self.n(d+1) + ", " + self.n(d+1) + "]|" + self.c(N_AGG) + ")"
    def b(self, d=0):
        r = self.r.random()
        if d > 2 or r < 0.25: return self.c(B_LIT)
        if r < 0.45: return "(" + self.any(d+1) + " " + self.c(['==', '!=', 'in']) + " " + self.any(d+1) + ")"
        if r < 0.6: return "(" + self.n(d+1) + " " + self.c(['<', '>', '<=', '>=']) + " " + self.n(d+1) + ")"
        if r < 0.75: return "((" + self.any(d+1) + ") is " + self.c(['not ', '']) + self.c(TESTS) + ")"
        if r < 0.82: return "((" + self.n(d+1) + ") is " + self.c(['odd', 'even', 'divisibleby 3']) + ")"
        if r < 0.9: return "(" + self.b(d+1) + " " + self.c(['and', 'or']) + " " + self.b(d+1) + ")"
        return "(not " + self.b(d+1) + ")"
    def l(self, d=0):
        r = self.r.random()
        if d > 2 or r < 0.3: return self.c(L_LIT)
        if r < 0.45: return "(" + self.s(d+1) + ")." + self.c(L_SMETH)
        if r < 0.6: return "(" + self.l(d+1) + "|" + self.c(L_FILT) + ")"
        if r < 0.7: return "(messages|" + self.c(L_MSG) + ")"
        if r < 0.8: return "(" + self.l(d+1) + ")[" + self.c(L_SLICE) + "]"
        if r < 0.9: return "(" + self.l(d+1) + " + " + self.l(d+1) + ")"
        return "{'k': " + self.any(d+1) + ", 'a': 1}.items()|list"
    def any(self, d=0):
        return self.c([self.s, self.n, self.b, self.l])(d)
    def stmt(self, d=0):
        r = self.r.random()
        ws = lambda: self.c(["", "", "-", "+"])
        wsv = lambda: self.c(["", "-"])
        pre = self.c(PRE)
        if d > 2 or r < 0.4: return pre + "{{" + wsv() + " " + self.any() + " " + wsv() + "}}" + self.c(POST)
        if r < 0.55: return (pre + "{%" + ws() + " if " + self.b() + " " + ws() + "%}\n" + self.body(d+1) + "{%" + ws() + " elif " + self.b() + " %}"
                             + self.body(d+1) + "{% else " + ws() + "%}" + self.body(d+1) + "{%" + ws() + " endif %}\n")
        if r < 0.68: return (pre + "{%" + ws() + " for m in " + self.c(['messages', 'tools or []', self.l()]) + " " + ws() + "%}\n" + self.body(d+1)
                             + "{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex0 }}{% else %}E{% endfor %}\n")
        if r < 0.74: return pre + "{% set x = " + self.any() + " %}{{ x }}"
        if r < 0.8: return pre + "{% set ns = namespace(a=" + self.any() + ") %}{% for m in messages %}{% set ns.a = " + self.any() + " %}{% endfor %}{{ ns.a }}"
        if r < 0.86: return pre + "{% macro mm(a, b=" + self.any() + ") %}" + self.body(d+1) + "[{{ a }}{{ b }}]{% endmacro %}{{ mm(" + self.any() + ") }}"
        if r < 0.92: return pre + "{#- c -#}\n{% filter " + self.c(['upper', 'trim', 'lower', 'title']) + " %}" + self.body(d+1) + "{% endfilter %}"
        return pre + "{% set x %}" + self.body(d+1) + "{% endset %}{{ x|length }}"
    def body(self, d):
        return "".join(self.stmt(d) for _ in range(self.r.randint(1, 3)))


def random_templates(seed, n):
    g = Gen(random.Random(seed))
    return ["{% set m = messages[0] %}" + g.body(0) for _ in range(n)]


# ---- random templates of text and tags: trim_blocks, lstrip_blocks, '-' and '+', raw, comments,
# every newline and many Unicode spaces

WS_TEXT = [" ", "  ", "\t", "\n", "\n\n", " \n", "\n  ", "a", "b c", "\u00a0", "\u3000", "\r\n",
           "\r", "x\n ", "\u2028", "\x0b", "\x1c"]


def whitespace_templates(seed, n):
    rng = random.Random(seed)

    def text():
        return "".join(rng.choice(WS_TEXT) for _ in range(rng.randint(0, 3)))

    def sign():
        return rng.choice(["", "-", "+"])

    def tag(words):
        return "{%" + sign() + " " + words + " " + sign() + "%}"

    def chunk(d):
        c = rng.random()
        if c < 0.25:
            return text()
        if c < 0.4:
            return "{{" + rng.choice(["", "-"]) + " 'v' " + rng.choice(["", "-"]) + "}}"
        if c < 0.5:
            return "{#" + sign() + " c " + sign() + "#}"
        if c < 0.55:
            return ("{%" + sign() + " raw " + rng.choice(["", "-"]) + "%}" + text() + "{{ x }}" + text()
                    + tag("endraw"))
        if c < 0.62:
            return tag("set q = 1")
        if c < 0.8 and d < 3:
            return (tag("if " + rng.choice(["true", "false"])) + body(d + 1) + tag("else")
                    + body(d + 1) + tag("endif"))
        if d < 3:
            return tag("for i in [1, 2]") + body(d + 1) + tag("endfor")
        return text()

    def body(d):
        return "".join(text() + chunk(d) + text() for _ in range(rng.randint(1, 3)))

    return [body(0) for _ in range(n)]
