"""embody: what a training script needs from the Embody platform, in the standard library.

    import embody

    start = 0
    if (path := embody.resume_path()) is not None:      # a restarted or preempted attempt
        start = load(path) + 1
    for step in range(start, steps):
        loss = train_step()
        embody.report(step=step, loss=loss)             # charted in the dashboard
        stop = embody.should_stop()                     # SIGTERM: preemption, cancel, time limit
        if stop or step % 1000 == 0:
            with embody.checkpoint_file(step) as path:  # uploaded to the blob store
                save(path, step)
        if stop:
            sys.exit(embody.STOPPED_EXIT_CODE)

Every job's python3 imports it without installing anything (the agent puts it on PYTHONPATH);
``pip install sdk/python`` installs it elsewhere. Outside a job every call still works: reports
are dropped after one warning, checkpoints are kept in ./checkpoints (EMBODY_STRICT=1 makes both
errors instead). ``embody.data`` reads imported datasets (it needs numpy).

The job-local API's refusals are exceptions carrying the agent's message: EventRefusedError
(400), NotInJobError (401/404), AgentBusyError (429 past a deadline); all derive EmbodyError.
"""

from embody import data
from embody._checkpoint import (checkpoint, checkpoint_file, checkpoint_path,
                                newest_checkpoint_from, resume_path)
from embody._env import local_rank, rank, world_size
from embody._errors import (AgentBusyError, AgentUnavailableError, ApiError, ChecksumError,
                            DataError, EmbodyError, EventRefusedError, NotInJobError)
from embody._report import NotInJobWarning, flush, report
from embody._signals import (STOPPED_EXIT_CODE, install_sigterm_handler, request_stop,
                             should_stop)

__version__ = "0.1.0"

__all__ = [
    "AgentBusyError", "AgentUnavailableError", "ApiError", "ChecksumError", "DataError",
    "EmbodyError", "EventRefusedError", "NotInJobError", "NotInJobWarning", "STOPPED_EXIT_CODE",
    "checkpoint", "checkpoint_file", "data", "checkpoint_path", "flush", "install_sigterm_handler",
    "local_rank", "newest_checkpoint_from", "rank", "report", "request_stop", "resume_path",
    "should_stop", "world_size",
]
