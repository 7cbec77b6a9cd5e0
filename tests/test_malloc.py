"""glibc allocator settings (headlab.engine.malloc): a user's own win over the jobs' defaults;
the memory probe's always win (a measurement must not depend on the caller's shell)."""
from headlab.engine.malloc import JOB_MALLOC, PROBE_MALLOC, job_environ, probe_environ


def test_job_settings_fill_in_and_a_users_own_win():
    env = job_environ({"PATH": "/bin", "MALLOC_TOP_PAD_": "0"})
    assert env["PATH"] == "/bin" and env["MALLOC_TOP_PAD_"] == "0"
    assert env["MALLOC_MMAP_THRESHOLD_"] == JOB_MALLOC["MALLOC_MMAP_THRESHOLD_"] == str(32 * 2**20)


def test_probe_settings_replace_the_callers():
    env = probe_environ({"PATH": "/bin", **JOB_MALLOC})
    assert env == {"PATH": "/bin", **PROBE_MALLOC} and env["MALLOC_MMAP_THRESHOLD_"] == "65536"

