#!/usr/bin/env python3
"""The rooms of server/ as docs/ARCHITECTURE.md declares them, checked.

The one declaration is the ```rooms block of docs/ARCHITECTURE.md: one line per
room, bottom first, "room: the rooms it may use". A room may use only rooms
declared above it, so the order is written once and can have no cycle. Fails
(exit 1, one "path:line: why" per problem) on:
  - an #include "server/..." that goes up or sideways (a room not declared
    as used), a flat or relative server include, a server include from
    core/, kernels/, proto/ or client/;
  - a room whose CMake library links rooms other than those it declares, or a
    server/CMakeLists.txt that adds the rooms in another order;
  - a loose file in server/, a folder that is not a declared room, a room of
    more than MAX_FILES sources;
  - the same for the rooms' unit tests: tests/server/<room>/ includes only
    what its room may, its CMakeLists.txt adds tests of that room
    (tensorop_room_tests) and links no room the room does not declare, and
    tests/server/ holds room folders only.
  scripts/check_rooms.py [--root DIR] [--self-test]
"""
import argparse, pathlib, re, shutil, subprocess, sys, tempfile

MAX_FILES = 15
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ROOM_CALL = re.compile(r'tensorop_room\(\s*(\w+)(.*?)\)', re.S)
KEYWORDS = {'SOURCES', 'ROOMS', 'PUBLIC', 'PRIVATE'}


def read_rooms(root):
    text = (root / 'docs/ARCHITECTURE.md').read_text()
    block = re.search(r'^```rooms\n(.*?)^```', text, re.S | re.M)
    if not block:
        sys.exit('docs/ARCHITECTURE.md: no ```rooms block')
    rooms, problems = {}, []
    for line in block.group(1).splitlines():
        line = line.split('#')[0].strip()
        if not line:
            continue
        name, _, uses = line.partition(':')
        name, uses = name.strip(), uses.split()
        for used in uses:
            if used not in rooms:
                problems.append(f'docs/ARCHITECTURE.md: room {name} uses {used}, '
                                'which is not declared above it')
        rooms[name] = set(uses)
    return rooms, problems


def check(root):
    rooms, problems = read_rooms(root)
    server = root / 'server'
    order = list(rooms)
    # The folder is the diagram: room folders only.
    for entry in sorted(server.iterdir()):
        if entry.is_dir() and entry.name not in rooms:
            problems.append(f'server/{entry.name}: not a room declared in docs/ARCHITECTURE.md')
        elif entry.is_file() and entry.name not in ('CMakeLists.txt', 'README.md'):
            problems.append(f'server/{entry.name}: a file outside the rooms')
    for room in rooms:
        sources = [p for p in (server / room).glob('*') if p.suffix in ('.h', '.cc')]
        if not (server / room).is_dir():
            problems.append(f'server/{room}: declared, but there is no such folder')
        elif len(sources) > MAX_FILES:
            problems.append(f'server/{room}: {len(sources)} files, more than {MAX_FILES}')
    # Includes.
    paths = [p for top in ('server', 'core', 'kernels', 'proto', 'client', 'tests', 'bench')
             for p in sorted((root / top).rglob('*')) if p.suffix in ('.h', '.cc', '.cpp')]
    for path in paths:
        rel = path.relative_to(root)
        top = rel.parts[0]
        room = rel.parts[1] if top == 'server' and len(rel.parts) > 2 else None
        if rel.parts[:2] == ('tests', 'server') and len(rel.parts) > 3:
            room = rel.parts[2]  # a room's unit tests stand where the room does
        for number, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            where = f'{rel}:{number}'
            if top == 'server' and ('/' not in target or target.startswith('.')):
                if (path.parent / target).exists():
                    problems.append(f'{where}: relative include "{target}": spell it server/<room>/...')
                continue
            if not target.startswith('server/'):
                continue
            parts = target.split('/')
            if top in ('core', 'kernels', 'proto', 'client'):
                problems.append(f'{where}: {top}/ includes {target}: the server is above it')
                continue
            if len(parts) != 3 or parts[1] not in rooms:
                problems.append(f'{where}: {target} is not server/<room>/<file>')
                continue
            if not (root / target).exists():
                problems.append(f'{where}: {target} does not exist')
            used = parts[1]
            if room and used != room and used not in rooms.get(room, ()):
                way = 'up' if order.index(used) > order.index(room) else 'sideways'
                problems.append(f'{where}: {room} includes {target} ({way}): '
                                f'{room} may use only {" ".join(sorted(rooms[room])) or "nothing"}')
    # CMake: each room links exactly the rooms it declares, added bottom first.
    added = re.findall(r'add_subdirectory\((\w+)\)', (server / 'CMakeLists.txt').read_text())
    if added != order:
        problems.append(f'server/CMakeLists.txt: rooms added as {added}, declared as {order}')
    for room in rooms:
        cmake = server / room / 'CMakeLists.txt'
        if not cmake.exists():
            problems.append(f'server/{room}/CMakeLists.txt: missing')
            continue
        text = cmake.read_text()
        for call in ROOM_CALL.finditer(text):
            words = call.group(2).split()
            linked = set()
            if 'ROOMS' in words:
                for word in words[words.index('ROOMS') + 1:]:
                    if word in KEYWORDS:
                        break
                    linked.add(word)
            if linked != rooms[room]:
                problems.append(f'server/{room}/CMakeLists.txt: tensorop_room({call.group(1)}) '
                                f'ROOMS {sorted(linked)}, declared {sorted(rooms[room])}')
        for other in re.findall(r'\btensorop_server_(\w+)', text):
            if other != room and other not in rooms[room]:
                problems.append(f'server/{room}/CMakeLists.txt: links tensorop_server_{other}, '
                                'not a room it declares')
    problems += check_room_tests(root, rooms)
    return problems


def check_room_tests(root, rooms):
    """tests/server/: a folder per room, each adding that room's tests and
    linking only the rooms it may use."""
    problems = []
    tests = root / 'tests' / 'server'
    if not tests.is_dir():
        return problems
    for entry in sorted(tests.iterdir()):
        where = entry.relative_to(root)
        if entry.is_dir() and entry.name not in rooms:
            problems.append(f'{where}: not a room declared in docs/ARCHITECTURE.md')
        elif entry.is_file() and entry.name != 'CMakeLists.txt':
            problems.append(f'{where}: a file outside the rooms\' test folders')
    for folder in sorted(p for p in tests.iterdir() if p.is_dir() and p.name in rooms):
        room = folder.name
        cmake = folder / 'CMakeLists.txt'
        if not cmake.exists():
            problems.append(f'{cmake.relative_to(root)}: missing')
            continue
        text = cmake.read_text()
        for added in re.findall(r'tensorop_room_tests\(\s*(\w+)', text):
            if added != room:
                problems.append(f'{cmake.relative_to(root)}: adds tests of room {added} in {room}\'s folder')
        for other in re.findall(r'\btensorop_server_(\w+)', text):
            if other != room and other not in rooms[room]:
                problems.append(f'{cmake.relative_to(root)}: links tensorop_server_{other}, '
                                f'not a room {room} declares')
    return problems


def self_test(root):
    """Planted edges the check must refuse, each naming where: an include that
    goes up, one that goes sideways (between rooms that do not use each
    other), and a room's library linking a room it does not declare."""
    rooms, _ = read_rooms(root)
    order = list(rooms)
    siblings = next((a, b) for a in order for b in order
                    if order.index(a) < order.index(b) and a not in rooms[b] and b not in rooms[a])
    low, high = order[0], order[-1]

    def plant_include(copy, low, other):
        victim = sorted((copy / 'server' / low).glob('*.cc'))[0]
        header = sorted((copy / 'server' / other).glob('*.h'))[0].name
        victim.write_text(f'#include "server/{other}/{header}"\n' + victim.read_text())
        return f'{victim.relative_to(copy)}:1: {low} includes server/{other}/{header}'

    def plant_link(copy):
        cmake = copy / 'server' / low / 'CMakeLists.txt'
        cmake.write_text(cmake.read_text() +
                         f'target_link_libraries(tensorop_server_{low} PUBLIC tensorop_server_{high})\n')
        return f'server/{low}/CMakeLists.txt: links tensorop_server_{high}'

    def plant_test_include(copy):
        room = next(r for r in order[1:] if (copy / 'tests' / 'server' / r).is_dir())
        victim = sorted((copy / 'tests' / 'server' / room).glob('*_test.cc'))[0]
        header = sorted((copy / 'server' / high).glob('*.h'))[0].name
        victim.write_text(f'#include "server/{high}/{header}"\n' + victim.read_text())
        return f'{victim.relative_to(copy)}:1: {room} includes server/{high}/{header} (up)'

    plants = [('up include', lambda copy: plant_include(copy, order[1], order[-2]) + ' (up)'),
              ('up include in a room\'s tests', plant_test_include),
              ('sideways include',
               lambda copy: plant_include(copy, siblings[1], siblings[0]) + ' (sideways)'),
              ('link', plant_link)]
    failures = 0
    for what, plant in plants:
        with tempfile.TemporaryDirectory() as tmp:
            copy = pathlib.Path(tmp)
            shutil.copytree(root / 'server', copy / 'server')
            shutil.copytree(root / 'tests' / 'server', copy / 'tests' / 'server')
            (copy / 'docs').mkdir()
            shutil.copy(root / 'docs/ARCHITECTURE.md', copy / 'docs')
            expected = plant(copy)
            if any(p.startswith(expected) for p in check(copy)):
                print(f'self-test: a planted {what} is refused: {expected}')
            else:
                print(f'self-test: a planted {what} was not refused (expected "{expected}")')
                failures += 1
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--root', type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument('--self-test', action='store_true')
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.root)
    problems = check(args.root)
    if problems:
        print(*problems, sep='\n')
    else:
        print(f'rooms: every include and link goes where docs/ARCHITECTURE.md allows '
              f'({len(read_rooms(args.root)[0])} rooms)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
