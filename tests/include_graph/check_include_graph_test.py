#!/usr/bin/env python3
"""check_include_graph.py on small fake trees: each rule refuses what it should, and only that."""

import contextlib
import io
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_include_graph as graph  # noqa: E402


class FakeTree:
    def __init__(self):
        self._dir = tempfile.TemporaryDirectory()
        self.root = self._dir.name

    def add(self, path, *includes):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write("#pragma once\n#include <vector>\n")
            for target in includes:
                f.write(f'#include "{target}"\n')
        return self

    def check(self):
        return graph.check(self.root)

    def close(self):
        self._dir.cleanup()


class IncludeGraphTest(unittest.TestCase):
    def setUp(self):
        # The real layer tables; exceptions emptied so each case states the ones it needs.
        patches = [mock.patch.object(graph, "KNOWN_EXCEPTIONS", {}),
                   mock.patch.object(graph, "TEST_CODE_ELSEWHERE", {})]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)
        self.tree = FakeTree()
        self.addCleanup(self.tree.close)
        # A clean base: includes downward only, and within a folder.
        (self.tree.add("common/status.h")
         .add("api/job_spec.h", "common/status.h")
         .add("storage/shard.h", "common/status.h", "storage/dtype.h")
         .add("storage/dtype.h")
         .add("engine/fp8/cpu_path.h")
         .add("engine/model/policy.h", "engine/fp8/cpu_path.h", "storage/shard.h")
         .add("engine/rl/ppo.h", "engine/model/policy.h", "api/job_spec.h")
         .add("engine/trainer.h", "engine/rl/ppo.h"))

    def assertOneViolation(self, *words):
        violations, stale, errors = self.tree.check()
        self.assertEqual((stale, errors), ([], []))
        self.assertEqual(len(violations), 1, violations)
        for w in words:
            self.assertIn(w, violations[0])

    def test_clean_tree_passes(self):
        self.assertEqual(self.tree.check(), ([], [], []))

    def test_upward_include_between_top_level_folders_fails(self):
        self.tree.add("common/log.h", "api/job_spec.h")
        self.assertOneViolation("common/log.h:3", "common may not include api (a higher layer)")

    def test_include_between_peers_fails(self):
        self.tree.add("agent/runner.cc", "engine/trainer.h")
        self.assertOneViolation("agent may not include engine (a peer)")

    def test_cycle_between_engine_subfolders_fails(self):
        # rl -> model exists; model -> rl closes a cycle, refused as the upward half.
        self.tree.add("engine/model/actor.h", "engine/rl/ppo.h")
        self.assertOneViolation("engine/model may not include engine/rl (a higher layer)")

    def test_engine_subfolder_including_the_root_fails(self):
        self.tree.add("engine/rl/save.cc", "engine/trainer.h")
        self.assertOneViolation("engine/rl may not include engine (a higher layer)")

    def test_tests_reach_their_own_component_and_the_listed_extras_only(self):
        (self.tree.add("engine/model/policy_test.cc", "engine/trainer.h", "tests/support/x.h")
         .add("cli/cli_pg_test.cc", "controlplane/server.h")
         .add("controlplane/server.h", "common/status.h"))
        self.assertEqual(self.tree.check(), ([], [], []))
        self.tree.add("agent/runner_test.cc", "controlplane/server.h")
        self.assertOneViolation("agent may not include controlplane (a peer)")

    def test_production_code_including_test_code_fails(self):
        self.tree.add("storage/testing/episodes.h", "storage/shard.h")
        self.tree.add("storage/reader.cc", "storage/testing/episodes.h")
        self.assertOneViolation("production code includes test code", "storage/testing/episodes.h")

    def test_known_exception_passes_and_is_reported_once_gone(self):
        self.tree.add("engine/rl/save.cc", "engine/trainer.h")
        with mock.patch.object(graph, "KNOWN_EXCEPTIONS", {("engine/rl", "engine"): "why"}):
            self.assertEqual(self.tree.check(), ([], [], []))
            os.remove(os.path.join(self.tree.root, "engine/rl/save.cc"))
            self.assertEqual(self.tree.check(), ([], ["engine/rl -> engine"], []))

    def test_folder_without_a_layer_is_a_table_error(self):
        self.tree.add("newdir/thing.cc", "common/status.h")
        _, _, errors = self.tree.check()
        self.assertEqual(errors, ["newdir/ has C++ sources but no layer in TOP_LAYERS"])

    def test_main_exit_status(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(graph.main(["check", self.tree.root]), 0)
            self.tree.add("common/log.h", "api/job_spec.h")
            self.assertEqual(graph.main(["check", self.tree.root]), 1)
        self.assertIn("common may not include api", out.getvalue())


if __name__ == "__main__":
    unittest.main()
