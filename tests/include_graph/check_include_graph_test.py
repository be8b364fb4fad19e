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
         .add("engine/cpu/cpu_path.h")
         .add("engine/model/policy.h", "engine/cpu/cpu_path.h", "storage/shard.h")
         .add("engine/rl/ppo.h", "engine/model/policy.h", "api/job_spec.h")
         .add("engine/policy/ptq.h", "engine/model/policy.h")
         .add("engine/jobs/train.cc", "engine/rl/ppo.h", "engine/policy/ptq.h"))

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
        self.tree.add("agent/runner.cc", "engine/train/trainer.h")
        self.assertOneViolation("agent may not include engine (a peer)")

    def test_cycle_between_engine_subfolders_fails(self):
        # rl -> model exists; model -> rl closes a cycle, refused as the upward half.
        self.tree.add("engine/model/actor.h", "engine/rl/ppo.h")
        self.assertOneViolation("engine/model may not include engine/rl (a higher layer)")

    def test_engine_source_outside_a_subfolder_is_a_table_error(self):
        self.tree.add("engine/ptq.h", "engine/model/policy.h")
        _, _, errors = self.tree.check()
        self.assertEqual(errors, ["engine/ has C++ sources but no layer in ENGINE_LAYERS"])

    def test_model_including_the_policy_above_it_fails(self):
        self.tree.add("engine/model/save.cc", "engine/policy/ptq.h")
        self.assertOneViolation("engine/model may not include engine/policy (a higher layer)")

    def test_policy_sits_below_evaluation_and_rl(self):
        # eval/ and rl/ both use the actor-critic; eval/ may not reach back into rl/.
        (self.tree.add("engine/policy/actor_critic.h", "engine/model/policy.h")
         .add("engine/eval/periodic_eval.h", "engine/policy/actor_critic.h")
         .add("engine/rl/sync_ppo.cc", "engine/eval/periodic_eval.h",
              "engine/policy/actor_critic.h"))
        self.assertEqual(self.tree.check(), ([], [], []))
        self.tree.add("engine/eval/eval_policy.cc", "engine/rl/ppo.h")
        self.assertOneViolation("engine/eval may not include engine/rl (a higher layer)")

    def test_cpu_dispatch_is_the_bottom_of_the_engine(self):
        self.tree.add("engine/fp8/codec.h", "engine/cpu/cpu_path.h")
        self.assertEqual(self.tree.check(), ([], [], []))
        self.tree.add("engine/cpu/features.cc", "engine/fp8/codec.h")
        self.assertOneViolation("engine/cpu may not include engine/fp8 (a higher layer)")

    def test_job_entries_are_the_top_of_the_engine(self):
        # jobs/ may include any subfolder; nothing in the engine includes jobs/.
        self.tree.add("engine/jobs/quantize.cc", "engine/policy/ptq.h", "engine/rl/ppo.h")
        self.assertEqual(self.tree.check(), ([], [], []))
        self.tree.add("engine/rl/ppo.cc", "engine/jobs/job.h")
        self.assertOneViolation("engine/rl may not include engine/jobs (a higher layer)")

    def test_formats_sit_below_simulation_and_distribution(self):
        (self.tree.add("engine/format/checkpoint.h", "engine/model/policy.h")
         .add("engine/dist/fp8_allreduce.h", "engine/format/checkpoint.h")
         .add("engine/sim/make_env.h", "engine/format/checkpoint.h"))
        self.assertEqual(self.tree.check(), ([], [], []))
        self.tree.add("engine/format/rollout.h", "engine/sim/make_env.h")
        self.assertOneViolation("engine/format may not include engine/sim (a higher layer)")

    def test_include_between_engine_peers_fails(self):
        # sim and dist share a layer: neither may include the other.
        self.tree.add("engine/sim/make_env.h").add("engine/dist/ranks.h", "engine/sim/make_env.h")
        self.assertOneViolation("engine/dist may not include engine/sim (a peer)")

    def test_engine_subfolder_without_a_layer_is_a_table_error(self):
        self.tree.add("engine/newdir/thing.cc", "engine/model/policy.h")
        _, _, errors = self.tree.check()
        self.assertEqual(errors, ["engine/newdir/ has C++ sources but no layer in ENGINE_LAYERS"])

    def test_agent_folders_include_downward_only(self):
        # The job runner uses the sandbox and the node's GPUs; the local API sits above the rsh
        # bridge; the assembled agent includes them all.
        (self.tree.add("agent/sandbox/spawn.h")
         .add("agent/node/gpu_pool.h")
         .add("agent/jobs/job_runner.h", "agent/sandbox/spawn.h", "agent/node/gpu_pool.h")
         .add("agent/rsh/rsh_bridge.h", "agent/jobs/job_runner.h")
         .add("agent/local_api/local_api.cc", "agent/rsh/rsh_bridge.h")
         .add("agent/agent.cc", "agent/local_api/local_api.cc", "common/status.h"))
        self.assertEqual(self.tree.check(), ([], [], []))
        self.tree.add("agent/sandbox/cgroup.cc", "agent/jobs/job_runner.h")
        self.assertOneViolation("agent/sandbox may not include agent/jobs (a higher layer)")

    def test_include_between_agent_peers_fails(self):
        # The heartbeat loop and the rsh bridge share a layer: neither may include the other.
        (self.tree.add("agent/rsh/rsh_bridge.h")
         .add("agent/heartbeat/heartbeat_loop.cc", "agent/rsh/rsh_bridge.h"))
        self.assertOneViolation("agent/heartbeat may not include agent/rsh (a peer)")

    def test_agent_subfolder_below_the_root_including_it_fails(self):
        self.tree.add("agent/agent_flags.h").add("agent/jobs/job_runner.h", "agent/agent_flags.h")
        self.assertOneViolation("agent/jobs may not include agent (a higher layer)")

    def test_agent_tests_reach_any_agent_folder(self):
        (self.tree.add("agent/local_api/local_api.h")
         .add("agent/node/gpu_collector_test.cc", "agent/local_api/local_api.h",
              "agent/testing/test_util.h"))
        self.assertEqual(self.tree.check(), ([], [], []))

    def test_agent_subfolder_without_a_layer_is_a_table_error(self):
        self.tree.add("agent/newdir/thing.cc")
        _, _, errors = self.tree.check()
        self.assertEqual(errors, ["agent/newdir/ has C++ sources but no layer in AGENT_LAYERS"])

    def test_tests_reach_their_own_component_and_the_listed_extras_only(self):
        (self.tree.add("engine/model/policy_test.cc", "engine/train/trainer.h", "tests/support/x.h")
         .add("cli/cli_server_test.cc", "controlplane/server.h")
         .add("controlplane/server.h", "common/status.h"))
        self.assertEqual(self.tree.check(), ([], [], []))
        self.tree.add("agent/runner_test.cc", "controlplane/server.h")
        self.assertOneViolation("agent may not include controlplane (a peer)")

    def test_production_code_including_test_code_fails(self):
        self.tree.add("storage/testing/episodes.h", "storage/shard.h")
        self.tree.add("storage/reader.cc", "storage/testing/episodes.h")
        self.assertOneViolation("production code includes test code", "storage/testing/episodes.h")

    def test_known_exception_passes_and_is_reported_once_gone(self):
        self.tree.add("engine/model/save.cc", "engine/policy/ptq.h")
        with mock.patch.object(graph, "KNOWN_EXCEPTIONS",
                               {("engine/model", "engine/policy"): "why"}):
            self.assertEqual(self.tree.check(), ([], [], []))
            os.remove(os.path.join(self.tree.root, "engine/model/save.cc"))
            self.assertEqual(self.tree.check(), ([], ["engine/model -> engine/policy"], []))

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
