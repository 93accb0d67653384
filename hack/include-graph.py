#!/usr/bin/env python3
"""The include graph and the CMake graph agree.

Fails when a C++ file of ours (lib/, cmd/, bench/, test/; sources and headers) includes a header of
one of our libraries that the file's own CMake target does not depend on.

  The CMake graph   comes from the configured build tree, never from a hand-kept list: the CMake
                    file API (codemodel-v2: every target's sources) and `cmake --graphviz` (every
                    target's direct link dependencies with their PUBLIC/PRIVATE/INTERFACE
                    keyword). The tool writes the file API query and re-runs cmake on BUILD_DIR
                    (a re-configure of an unchanged tree: no rebuild follows).
  Header -> library the library target that lists the header, or its .cc (generated sources
                    such as proto/dra/v1/api.grpc.pb.cc count by their path under the target's
                    include directories); a header without a .cc belongs to the one library whose
                    sources sit in the header's folder.
  A file's targets  every target that lists the .cc; for a header, the target that lists it or
                    its .cc; a header no target lists is checked as part of every target with a
                    source that includes it (directly or through other headers).
  "Depends on"      target Y may include the headers of Y itself, of every direct dependency of Y
                    (any keyword), and of whatever those pass on through PUBLIC or INTERFACE
                    dependencies, transitively. That is how CMake propagates include use; a
                    dependency that reaches Y only through a PRIVATE edge further down does not
                    count.

Usage: hack/include-graph.py [BUILD_DIR]     (default build/default)
       hack/include-graph.py --self-test
Prints "FILE includes HEADER (library X) but target Y does not depend on X" for each violation,
then one line "include-graph: N files checked, M violations"; exits 1 on any violation, 2 when the
build tree cannot be read.
"""

import glob
import json
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = ("lib/", "cmd/", "bench/", "test/")
LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "MODULE_LIBRARY", "OBJECT_LIBRARY",
                 "INTERFACE_LIBRARY"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
EDGE_RE = re.compile(r'^\s*"(node\d+)"\s*->\s*"(node\d+)"\s*(\[[^\]]*\])?', re.M)
NODE_RE = re.compile(r'^\s*"(node\d+)"\s*\[\s*label\s*=\s*"([^"]*)"', re.M)
QUERY_DIR = ".cmake/api/v1/query/client-dra-include-graph"
DOT_DIR = "include-graph"
GRAPHVIZ_OPTIONS = """\
# Written by hack/include-graph.py: one graph of our targets, no per-target files.
set(GRAPHVIZ_GENERATE_PER_TARGET FALSE)
set(GRAPHVIZ_GENERATE_DEPENDERS FALSE)
"""


class Model:
    """Targets, their sources and their direct dependency edges with the CMake keyword."""

    def __init__(self):
        self.types = {}    # target -> CMake type
        self.sources = {}  # target -> [keys]: repo-relative, or relative to an include dir
        self.edges = {}    # target -> [(dependency, "PUBLIC" | "PRIVATE" | "INTERFACE")]

    def add(self, name, type_, sources, deps=()):
        self.types[name] = type_
        self.sources[name] = list(sources)
        self.edges[name] = list(deps)
        return self


def visible(model, target):
    """The targets whose headers `target` may include: itself, its direct dependencies, and
    what those pass on through PUBLIC/INTERFACE dependencies."""
    seen = {target}
    todo = [dep for dep, _ in model.edges.get(target, [])]
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        todo.extend(dep for dep, kw in model.edges.get(t, []) if kw != "PRIVATE")
    return seen


def owners(model, exists):
    """(header -> library, file -> [targets]) from the targets' sources. `exists(path)` says
    whether a repo-relative path is a file of the tree."""
    header_lib, file_targets, folder_libs = {}, {}, {}
    for name, srcs in sorted(model.sources.items()):
        is_lib = model.types[name] in LIBRARY_TYPES
        for src in srcs:
            file_targets.setdefault(src, []).append(name)
            stem, ext = os.path.splitext(src)
            header = src if ext in (".h", ".hpp") else stem + ".h"
            if is_lib:
                header_lib.setdefault(header, name)
                folder_libs.setdefault(os.path.dirname(src), set()).add(name)
            elif header != src and exists(header):
                # An executable's own header (cmd/x/foo.h beside foo.cc): the executable owns it.
                file_targets.setdefault(header, []).append(name)
    for header, lib in header_lib.items():
        if exists(header):
            file_targets.setdefault(header, [])
            if lib not in file_targets[header]:
                file_targets[header].append(lib)
    return header_lib, file_targets, folder_libs


def library_of(header, header_lib, folder_libs):
    lib = header_lib.get(header)
    if lib:
        return lib
    libs = folder_libs.get(os.path.dirname(header), set())
    return next(iter(libs)) if len(libs) == 1 else None


def check(model, files, read, exists):
    """Violations, one message a line, for `files` (repo-relative). `read(path)` gives a file's
    text."""
    header_lib, file_targets, folder_libs = owners(model, exists)
    includes = {path: INCLUDE_RE.findall(read(path)) for path in files}
    # A header no target lists (by itself or by its .cc) is compiled as part of whatever includes
    # it: it is checked once for each target of a source that reaches it.
    reached_by = {}
    for path in files:
        if path.endswith(".h"):
            continue
        todo, seen = [path], set()
        while todo:
            f = todo.pop()
            for inc in includes.get(f, []):
                if inc in includes and inc not in seen:
                    seen.add(inc)
                    todo.append(inc)
                    reached_by.setdefault(inc, set()).update(file_targets.get(path, []))
    out = []
    for path in files:
        targets = file_targets.get(path) or reached_by.get(path, set())
        for target in sorted(set(targets)):
            allowed = visible(model, target)
            for inc in includes[path]:
                lib = library_of(inc, header_lib, folder_libs)
                if lib is None or lib in allowed:
                    continue
                out.append(f"{path} includes {inc} (library {lib}) but target {target} "
                           f"does not depend on {lib}")
    return out


def parse_dot(text):
    """{target: [(dependency, keyword)]} from `cmake --graphviz` output: no style is PUBLIC,
    dotted PRIVATE, dashed INTERFACE."""
    labels = dict(NODE_RE.findall(text))
    edges = {}
    for src, dst, attrs in EDGE_RE.findall(text):
        kw = "PUBLIC"
        if "dotted" in attrs:
            kw = "PRIVATE"
        elif "dashed" in attrs:
            kw = "INTERFACE"
        edges.setdefault(labels[src], []).append((labels[dst], kw))
    return edges


def load(build):
    """The Model of a configured build tree (re-runs cmake there with the file API query and
    --graphviz)."""
    build = os.path.abspath(build)
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        raise SystemExit(f"include-graph: {build} is not a configured build tree "
                         "(cmake --preset default)")
    os.makedirs(os.path.join(build, QUERY_DIR), exist_ok=True)
    with open(os.path.join(build, QUERY_DIR, "query.json"), "w") as f:
        json.dump({"requests": [{"kind": "codemodel", "version": 2}]}, f)
    os.makedirs(os.path.join(build, DOT_DIR), exist_ok=True)
    with open(os.path.join(build, "CMakeGraphVizOptions.cmake"), "w") as f:
        f.write(GRAPHVIZ_OPTIONS)
    dot = os.path.join(build, DOT_DIR, "targets.dot")
    run = subprocess.run(["cmake", build, f"--graphviz={dot}"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        raise SystemExit(f"include-graph: cmake {build} failed")
    reply = os.path.join(build, ".cmake/api/v1/reply")
    index = max(glob.glob(os.path.join(reply, "index-*.json")))
    with open(index) as f:
        idx = json.load(f)
    codemodel = idx["reply"]["client-dra-include-graph"]["query.json"]["responses"][0]["jsonFile"]
    with open(os.path.join(reply, codemodel)) as f:
        cm = json.load(f)
    source_dir = cm["paths"]["source"]
    model = Model()
    config = cm["configurations"][0]
    with open(dot) as f:
        edges = parse_dot(f.read())
    for ref in config["targets"]:
        with open(os.path.join(reply, ref["jsonFile"])) as f:
            t = json.load(f)
        incdirs = {inc["path"] for g in t.get("compileGroups", []) for inc in g.get("includes", [])}
        keys = []
        for s in t.get("sources", []):
            p = s["path"]
            if not os.path.isabs(p):
                keys.append(p)
                continue
            # A generated source: its path under the include directory it is included from.
            for d in sorted(incdirs):
                if d != source_dir and p.startswith(d + "/"):
                    keys.append(os.path.relpath(p, d))
        model.add(t["name"], t["type"], keys, edges.get(t["name"], []))
    return model


def main(argv):
    build = argv[1] if len(argv) > 1 else "build/default"
    os.chdir(ROOT)
    model = load(build)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", *OURS],
                           capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in files if f.endswith((".h", ".cc")) and os.path.isfile(f)]

    def read(p):
        with open(p, errors="replace") as f:
            return f.read()

    violations = check(model, files, read, os.path.isfile)
    for v in violations:
        print(v)
    if violations:
        print("include-graph: add the library to the target's DEPS in its CMakeLists.txt "
              "(dra_library/dra_test), or drop the include if the file does not use it")
    print(f"include-graph: {len(files)} files checked, {len(violations)} violations")
    return 1 if violations else 0


class SelfTest(unittest.TestCase):
    FILES = {
        "lib/a/a.h": "", "lib/a/a.cc": '#include "lib/a/a.h"\n',
        "lib/a/only_header.h": "",
        "lib/b/b.h": '#include "lib/a/a.h"\n', "lib/b/b.cc": '#include "lib/b/b.h"\n',
        "lib/c/c.h": "", "lib/c/c.cc": '#include "lib/b/b.h"\n#include "lib/a/a.h"\n',
        "lib/d/d.h": "", "lib/d/d.cc": '#include "lib/a/only_header.h"\n',
        "cmd/x/main.cc": '#include "lib/c/c.h"\n#include "lib/a/a.h"\n#include "absl/x.h"\n',
        "cmd/x/helper.h": '#include "lib/d/d.h"\n', "cmd/x/helper.cc": "",
        "proto/p.pb.h": "",
    }

    def model(self, c_to_b="PUBLIC", x_to_d=True):
        m = Model()
        m.add("a", "STATIC_LIBRARY", ["lib/a/a.cc"])
        m.add("b", "STATIC_LIBRARY", ["lib/b/b.cc"], [("a", "PUBLIC")])
        m.add("p", "STATIC_LIBRARY", ["proto/p.pb.cc"])
        m.add("c", "STATIC_LIBRARY", ["lib/c/c.cc"], [("b", c_to_b)])
        m.add("d", "STATIC_LIBRARY", ["lib/d/d.cc"], [("a", "PRIVATE")])
        m.add("x", "EXECUTABLE", ["cmd/x/main.cc", "cmd/x/helper.cc"],
              [("c", "PRIVATE")] + ([("d", "PRIVATE")] if x_to_d else []))
        return m

    def run_check(self, model):
        return check(model, sorted(self.FILES), self.FILES.__getitem__, self.FILES.__contains__)

    def test_agreeing_graphs_pass(self):
        self.assertEqual(self.run_check(self.model()), [])

    def test_missing_dependency_is_reported(self):
        self.assertEqual(self.run_check(self.model(x_to_d=False)), [
            "cmd/x/helper.h includes lib/d/d.h (library d) but target x does not depend on d"])

    def test_private_edge_does_not_pass_headers_on(self):
        # c links b PRIVATE: c may include b and a (b passes a on PUBLIC); x, which links c, may
        # include c's headers but not a's.
        self.assertEqual(self.run_check(self.model(c_to_b="PRIVATE")), [
            "cmd/x/main.cc includes lib/a/a.h (library a) but target x does not depend on a"])

    def test_header_only_file_belongs_to_its_folders_library(self):
        m = self.model()
        m.edges["d"] = []
        self.assertEqual(self.run_check(m), [
            "lib/d/d.cc includes lib/a/only_header.h (library a) but target d does not depend on a"])

    def test_dot_styles(self):
        dot = ('"node0" [ label = "x", shape = egg ];\n"node1" [ label = "c" ];\n'
               '"node2" [ label = "b" ];\n"node3" [ label = "a" ];\n'
               '"node0" -> "node1" [ style = dotted ] // x -> c\n'
               '"node1" -> "node2"  // c -> b\n"node2" -> "node3" [ style = dashed ]\n')
        self.assertEqual(parse_dot(dot), {"x": [("c", "PRIVATE")], "c": [("b", "PUBLIC")],
                                          "b": [("a", "INTERFACE")]})


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.argv[1:] = []
        unittest.main(verbosity=1)
    sys.exit(main(sys.argv))
