#!/usr/bin/env python3
"""docs/ARCHITECTURE.md's "Adding an operator", held against every operator.

Each row of core/operator_info.h's kOperators is an operator; for each one this
checks every per-operator place the list names (a proto field, a struct, files,
a case in a switch, a v2 model, a docs section, public cases), and that the list
still has the steps checked here: a step added to the list without a check, or
an operator missing a place, fails. Run by ctest as docs.AddingAnOperatorHolds,
after --self-test plants an operator that has no places and a step with no check.

  scripts/check_operators.py [--self-test]
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def camel(op):
    return ''.join(word.title() for word in op.split('_'))


def text(path):
    file = ROOT / path
    return file.read_text() if file.exists() else ''


def oneof_fields(proto, message):
    """The `Type name` pairs of `message`'s oneof op in the proto text."""
    found = re.search(r'message ' + message + r' \{.*?oneof op \{(.*?)\}', proto, re.S)
    return set(re.findall(r'(\w+) (\w+) = \d+;', found.group(1))) if found else set()


# The per-operator places, by the step of the list that names them: each a
# description and a check taking the operator's name.
def places():
    proto = text('proto/tensorop/v1/tensorop.proto')
    attrs = text('core/attrs.h')
    variant = re.search(r'using OpAttrs =\s*std::variant<([^>]*)>', attrs)
    variant = variant.group(1) if variant else ''
    return {
        1: [('an attrs message in tensorop.proto', lambda op: f'message {camel(op)}Attrs {{' in proto),
            ('a field in RunRequest.op',
             lambda op: (f'{camel(op)}Attrs', op) in oneof_fields(proto, 'RunRequest')),
            ('a field in ChainStep.op',
             lambda op: (f'{camel(op)}Attrs', op) in oneof_fields(proto, 'ChainStep'))],
        2: [('its struct in core/attrs.h', lambda op: f'struct {camel(op)}Attrs {{' in attrs),
            ('its struct in OpAttrs', lambda op: f'{camel(op)}Attrs' in variant)],
        3: [('core/validate/<op>.{h,cc}',
             lambda op: (ROOT / f'core/validate/{op}.h').exists()
             and (ROOT / f'core/validate/{op}.cc').exists()),
            ('tests/core/validation/<op>_test.cc',
             lambda op: (ROOT / f'tests/core/validation/{op}_test.cc').exists())],
        4: [('core/plan/<op>.{h,cc}',
             lambda op: (ROOT / f'core/plan/{op}.h').exists()
             and (ROOT / f'core/plan/{op}.cc').exists())],
        5: [('a Planner and an OutputSizer overload in core/operator.cc',
             lambda op: text('core/operator.cc').count(f'operator()(const {camel(op)}Attrs&') == 2)],
        6: [('case in both switches of server/wire/convert.cc (the name, the conversion)',
             lambda op: text('server/wire/convert.cc').count(
                 f'case v1::RunRequest::k{camel(op)}:') == 2)],
        7: [],  # client/case_format.cc follows the proto by reflection (SetAttrs)
        8: [('tests/core/kernels/<op>_test.cc',
             lambda op: (ROOT / f'tests/core/kernels/{op}_test.cc').exists()),
            ('a benchmark in bench/operators_bench.cc',
             lambda op: f'{camel(op)}Attrs' in text('bench/operators_bench.cc'))],
        9: [],  # server/v2 makes each model from the row and the attrs message (ModelOf)
        10: [('its section in docs/operators.md',
              lambda op: re.search(rf'^## {camel(op)}\b', text('docs/operators.md'), re.M)),
             ('its row in docs/operators.md\'s names table',
              lambda op: f'| {camel(op)} | `{op}`:' in text('docs/operators.md')),
             ('tests/conformance/cases/<op>.json',
              lambda op: (ROOT / f'tests/conformance/cases/{op}.json').exists())],
    }


def operators():
    return re.findall(r'Describe\("(\w+)"', text('core/operator_info.h'))


def list_steps():
    """The step numbers of the list in docs/ARCHITECTURE.md."""
    section = re.search(r'^## Adding an operator\n(.*?)^## ', text('docs/ARCHITECTURE.md'),
                        re.S | re.M)
    return [int(n) for n in re.findall(r'^(\d+)\. ', section.group(1), re.M)] if section else []


def problems(ops, steps, checks):
    found = []
    if sorted(steps) != sorted(checks):
        found.append(f'docs/ARCHITECTURE.md lists steps {steps}; this script checks '
                     f'{sorted(checks)}: give each new step its check here')
    if not ops:
        found.append('core/operator_info.h: no operator rows found')
    for op in ops:
        for step in sorted(checks):
            for what, holds in checks[step]:
                if not holds(op):
                    found.append(f'{op}: step {step}: no {what}')
    return found


def main():
    checks = places()
    if '--self-test' in sys.argv:
        planted = problems(['planted_op'], list_steps(), checks)
        assert planted and all(p.startswith('planted_op: ') for p in planted), planted
        assert {int(p.split('step ')[1].split(':')[0]) for p in planted} == \
            {s for s in checks if checks[s]}, planted
        print(f'a planted operator without its places is refused ({len(planted)} places)')
        extra = problems(operators(), list_steps() + [11], checks)
        assert len(extra) == 1 and 'steps' in extra[0], extra
        print('a planted step without a check is refused')
    found = problems(operators(), list_steps(), checks)
    for problem in found:
        print(problem, file=sys.stderr)
    if found:
        return 1
    total = sum(len(c) for c in checks.values())
    print(f'operators: {len(operators())} rows, each in the {total} places the '
          f'{len(list_steps())} steps of "Adding an operator" name')
    return 0


if __name__ == '__main__':
    sys.exit(main())
