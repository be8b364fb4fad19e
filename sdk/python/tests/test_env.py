"""Ranks, and what the job's environment says."""

from __future__ import annotations

from support import SdkTestCase

import embody
from embody import _env


class RankTest(SdkTestCase):
    def test_defaults_outside_any_launcher(self) -> None:
        self.assertEqual((embody.rank(), embody.world_size(), embody.local_rank()), (0, 1, 0))

    def test_open_mpi_names(self) -> None:
        self.setenv({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                     "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
        self.assertEqual((embody.rank(), embody.world_size(), embody.local_rank()), (3, 8, 1))

    def test_torch_names_come_first(self) -> None:
        self.setenv({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                     "OMPI_COMM_WORLD_LOCAL_RANK": "1", "RANK": "5", "WORLD_SIZE": "6",
                     "LOCAL_RANK": "0"})
        self.assertEqual((embody.rank(), embody.world_size(), embody.local_rank()), (5, 6, 0))

    def test_a_value_that_is_not_a_number_is_said(self) -> None:
        self.setenv({"RANK": "zero"})
        with self.assertRaisesRegex(ValueError, "RANK='zero' is not an integer"):
            embody.rank()


class JobEnvTest(SdkTestCase):
    def test_outside_a_job(self) -> None:
        self.assertIsNone(_env.job_env())

    def test_a_job(self) -> None:
        self.setenv({"EMBODY_AGENT_URL": "https://127.0.0.1:9443", "EMBODY_JOB_ID": "12",
                     "EMBODY_JOB_TOKEN": "t", "EMBODY_CA_FILE": "/etc/embody/ca.pem"})
        self.assertEqual(_env.job_env(), _env.JobEnv("https://127.0.0.1:9443", 12, "t",
                                                     "/etc/embody/ca.pem"))

    def test_a_url_that_is_not_http(self) -> None:
        self.setenv({"EMBODY_AGENT_URL": "127.0.0.1:9000", "EMBODY_JOB_ID": "1",
                     "EMBODY_JOB_TOKEN": "t"})
        with self.assertRaisesRegex(embody.NotInJobError, "http:// or https://"):
            _env.job_env()

    def test_checkpoint_dir(self) -> None:
        self.assertEqual(_env.checkpoint_dir(), "./checkpoints")
        self.setenv({"EMBODY_CHECKPOINT_DIR": "/data/checkpoints/job-3"})
        self.assertEqual(_env.checkpoint_dir(), "/data/checkpoints/job-3")
