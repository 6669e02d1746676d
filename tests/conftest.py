"""Suite-wide: the tests run with their own temporary folder, and the run fails if anything of
chatdata's is left in it (``chatdata-*`` folders from ``memmap()`` without a prefix, the demo, the
examples, or ``.NAME.tmp-*`` save folders). pytest's own ``tmp_path`` folders are kept as usual.
Also: the session's one Ray cluster (``ray_cluster``), and how ``pytest -n 2 --dist loadfile`` (CI)
hands out the test files (the long ones first, one torch thread per worker). Hypothesis examples
are the same on every run unless ``HYPOTHESIS_PROFILE=explore``."""
import os
import shutil
import tempfile

import pytest
from hypothesis import settings

_STATE = {}

# Hypothesis draws the same examples on every run by default, so a red CI always reproduces and a
# green one is not luck. To explore new examples, run with HYPOTHESIS_PROFILE=explore (random seeds,
# more examples); what it finds goes in a test of its own.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # pragma: no cover - xdist workers share the controller's folder
        # one torch thread per worker: with `-n 2` on 2 cores, torch's default (a thread per core) in
        # each worker puts 4 OpenMP threads on 2 cores, and their spinning wastes the CPU
        import torch

        torch.set_num_threads(1)
        return
    root = tempfile.mkdtemp(prefix="chatdata-tests-")
    _STATE["root"], _STATE["old"] = root, (os.environ.get("TMPDIR"), tempfile.tempdir)
    os.environ["TMPDIR"] = root  # subprocesses (CLI tests, examples) inherit it
    tempfile.tempdir = root


# Files whose few tests take long (a venv to build, a matrix of every template, servers, scripts run
# as processes). Under `pytest -n 2 --dist loadfile` (CI) xdist hands out whole files, most tests
# first, so these would come last and leave one worker alone at the end; they start first instead.
LONG_FILES = ("tests/matrix/test_matrix.py", "tests/cli/test_readme.py", "tests/gateway/test_gateway_e2e.py",
              "tests/io/test_io_ray.py", "tests/test_examples.py", "tests/train/test_example_train_sft.py",
              "tests/test_notebook.py", "tests/view/test_html_in_chromium.py", "tests/test_benchmarks_run.py")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent without it (or with -p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            for scope in reversed(LONG_FILES):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return LongFilesFirst(config, log)


def _is_ours(name):
    # chatdata-memmap-* folders belong to objects still alive and go when they do (or at exit)
    return (name.startswith("chatdata-") and not name.startswith("chatdata-memmap-")) or ".tmp-" in name


def _leftovers(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root:  # pytest's tmp_path folders hold what tests made on purpose
            dirnames[:] = [d for d in dirnames if not d.startswith("pytest-of-")]
        found += [os.path.join(dirpath, n) for n in dirnames + filenames if _is_ours(n)]
        dirnames[:] = [d for d in dirnames if not _is_ours(d)]
    return found


def pytest_sessionfinish(session, exitstatus):
    root = _STATE.pop("root", None)
    if root is None:
        return
    import gc

    gc.collect()  # memmap()'s temporary folders go with their objects
    leaks = _leftovers(root)
    old_env, old_tempdir = _STATE.pop("old")
    if old_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old_env
    tempfile.tempdir = old_tempdir
    if leaks:
        print("\nthe tests left these in the temporary folder:\n  " + "\n  ".join(leaks[:20]))
        session.exitstatus = 1
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster():
    """One real local Ray cluster of 2 CPUs for every Ray test of the session (tests/io and
    tests/hygiene): starting one costs seconds, so it starts once. It is started by
    ``chatdata.ray.jobs.connect(None, num_cpus=2)``, the command's own way, so its workers import this
    checkout; the workers keep the environment they start with (no usage stats, no tokenizer
    threads in forked workers), and this process gets its own back at once."""
    import ray

    from chatdata.ray.jobs import connect

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "RAY_USAGE_STATS_ENABLED", "TOKENIZERS_PARALLELISM")}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        assert connect(None, num_cpus=2), "Ray was already running in the test process"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        yield ray
    finally:
        ray.shutdown()
