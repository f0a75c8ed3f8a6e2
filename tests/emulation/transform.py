#!/usr/bin/env python3
"""Rewrites one CUDA source of framework/cuda/ (.cu or .cuh) into host C++ for the SIMT emulator of
emu.h, for test_cuda_emulation. Usage: transform.py SOURCE OUTPUT

The kernels themselves are left as written; only what a host compiler cannot take is rewritten:

  kernel<<<grid, block, 0, stream>>>(args)
      -> ::emu::launch(dim3(grid), dim3(block), [=] { kernel(args); })
     The emulator runs the grid at once (one stream, everything synchronous), so the stream is
     dropped; dynamic shared memory (a third argument other than 0, extern __shared__) is not
     emulated and stops the build.

  __shared__ T name[extent];
      -> static auto& name = ::emu::shared_storage<T[extent]>();
         ::emu::shared_array(name, sizeof(name));
     One block runs at a time, so one array stands for every block's shared memory. It ends at
     an inaccessible page (an access past it faults), and the second call fills it with NaN bytes
     when each block first reaches it (a read before the block wrote it shows in the results) and
     counts it toward CUDA's 48 KB.

  the body of a __device__ function holding asm(...)
      -> its host body from HOST_BODIES. Inline PTX cannot run here; PTX this script does not
     know stops the build, so that a new use gets a host equivalent on purpose.

  plus the edits of KNOBS (constants the test changes at run time), which must match.

Comments and string literals are masked before any pattern is searched, and every replacement
keeps the number of lines, so with the #line directive on top compiler messages and __LINE__
(which the emulator's barrier checks compare) point into the original source.
"""

import os
import re
import sys

HOST_BODIES = {
    # attention.cu: a volatile shared-memory load, so that ptxas reloads the word instead of
    # keeping it in a register. On the host no other thread runs between two loads: the same value.
    'reload': 'return *p;',
}

KNOBS = {
    # The grid cap of the grid-stride kernels becomes a variable, so that the test can shrink it
    # and make every grid-stride loop go round more than once.
    'grid_stride.cuh': [
        (r'inline\s+constexpr\s+(int64_t\s+kMaxGridBlocks\s*=)', r'inline \1'),
    ],
}


def fail(path, code, pos, message):
    line = code.count('\n', 0, pos) + 1
    sys.exit(f'{path}:{line}: transform.py: {message}')


def mask(src):
    """src with comments and string/char literals blanked (same length, newlines kept)."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != '\n':
                out[k] = ' '

    while i < n:
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif src[i] == '"' or (src[i] == "'" and not (i > 0 and src[i - 1].isalnum())):
            # A ' after a digit or letter is a digit separator (1'000), not a literal.
            quote, j = src[i], i + 1
            while j < n and src[j] != quote:
                j += 2 if src[j] == '\\' else 1
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return ''.join(out)


def matching(code, open_pos, open_ch, close_ch):
    """Index of the bracket closing the one at open_pos."""
    depth = 0
    for k in range(open_pos, len(code)):
        if code[k] == open_ch:
            depth += 1
        elif code[k] == close_ch:
            depth -= 1
            if depth == 0:
                return k
    return -1


def split_top_level(text):
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        elif ch == ',' and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def kernel_start(code, end):
    """Start of the kernel expression ending just before `end`: name, template arguments."""
    k = end
    while k > 0 and code[k - 1].isspace():
        k -= 1
    if code[k - 1] == '>':  # template arguments: walk back to the matching '<'
        depth = 0
        while True:
            k -= 1
            if code[k] == '>':
                depth += 1
            elif code[k] == '<':
                depth -= 1
                if depth == 0:
                    break
    m = re.search(r'[\w:]+\s*$', code[:k])
    return m.start()


def launch_edits(path, src, code):
    edits = []
    for m in re.finditer(r'<<<', code):
        lt = m.start()
        gt = code.find('>>>', lt)
        paren = gt + 3
        while paren < len(code) and code[paren].isspace():
            paren += 1
        close = matching(code, paren, '(', ')') if code[paren:paren + 1] == '(' else -1
        if gt < 0 or close < 0:
            fail(path, code, lt, 'cannot parse this launch')
        config = split_top_level(src[lt + 3:gt])
        if not 2 <= len(config) <= 4 or (len(config) >= 3 and config[2] != '0'):
            fail(path, code, lt, 'launch config must be <<<grid, block[, 0[, stream]]>>> '
                                 '(dynamic shared memory is not emulated)')
        start = kernel_start(code, lt)
        kernel = ' '.join(src[start:lt].split())
        args = ' '.join(src[paren + 1:close].split())
        grid, block = (' '.join(c.split()) for c in config[:2])
        edits.append((start, close + 1,
                      f'::emu::launch(dim3({grid}), dim3({block}), [=] {{ {kernel}({args}); }})'))
    return edits


def shared_edits(path, src, code):
    edits = []
    pattern = re.compile(r'__shared__\s+(?P<type>[^;\[\]]+?)\s+(?P<name>\w+)\s*'
                         r'(?P<extent>(\[[^;]*\])+)\s*;')
    for m in pattern.finditer(code):
        text = lambda g: ' '.join(src[m.start(g):m.end(g)].split())
        if re.search(r'\bextern\s*$', code[:m.start()]) or '[]' in text('extent').replace(' ', ''):
            fail(path, code, m.start(), 'dynamic (extern) shared memory is not emulated')
        name = text('name')
        array_type = text('type') + text('extent')
        edits.append((m.start(), m.end(),
                      f'static auto& {name} = ::emu::shared_storage<{array_type}>(); '
                      f'::emu::shared_array({name}, sizeof({name}));'))
    found = {e[0] for e in edits}
    for m in re.finditer(r'\b__shared__\b', code):
        if m.start() not in found:
            fail(path, code, m.start(), '__shared__ other than a fixed-size array declaration')
    return edits


def asm_edits(path, src, code):
    edits = []
    for name, body in HOST_BODIES.items():
        for m in re.finditer(r'\b' + name + r'\s*\([^;{)]*\)\s*\{', code):
            close = matching(code, m.end() - 1, '{', '}')
            if re.search(r'\basm\b', code[m.end():close]):
                edits.append((m.end(), close, f' {body} '))
    return edits


def apply(src, edits):
    """Replaces each (start, end) span, padding with newlines so later lines keep their number."""
    out, last = [], len(src)
    for start, end, text in sorted(edits, reverse=True):
        assert end <= last, 'overlapping edits'
        lost = src.count('\n', start, end) - text.count('\n')
        assert lost >= 0
        out.append(src[end:last])
        out.append(text + '\n' * lost)
        last = start
    out.append(src[:last])
    return ''.join(reversed(out))


def transform(path, src):
    code = mask(src)
    edits = launch_edits(path, src, code) + shared_edits(path, src, code) + \
        asm_edits(path, src, code)
    out = apply(src, edits)
    for pattern, replacement in KNOBS.get(os.path.basename(path), []):
        out, count = re.subn(pattern, replacement, out)
        if count != 1:
            sys.exit(f'{path}: transform.py: expected one match of {pattern!r}, found {count} '
                     '(update KNOBS and the test that uses it)')
    asm = re.search(r'\basm\b', mask(out))
    if asm:
        fail(path, mask(out), asm.start(),
             'inline PTX the emulator cannot run: give its function a host body in HOST_BODIES')
    quoted = os.path.abspath(path).replace('\\', '/').replace('"', '\\"')
    return f'#line 1 "{quoted}"\n' + out


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: transform.py SOURCE OUTPUT')
    source, output = sys.argv[1:]
    with open(source, encoding='utf-8') as f:
        result = transform(source, f.read())
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, 'w', encoding='utf-8') as f:
        f.write(result)


if __name__ == '__main__':
    main()
