"""`lngb run` and files: both outputs or neither, every write checked, clear messages.

Each output is written to a temporary file beside it (every byte, fsynced) and renamed into place
only when both are complete; symlinks are followed (the bytes go where the link points), and a
character device or FIFO at the end of one is written in place."""
import errno
import os
import shutil
import stat
import subprocess
import threading

import numpy as np
import pytest

from lngb.cli import main

pytestmark = pytest.mark.jitted

SHAPE = (1, 8, 8)
GAMMA, BETA = "output_pd_gamma.bin", "output_pd_beta.bin"
OLD_GAMMA, OLD_BETA = b"old gamma from an earlier run", b"old beta from an earlier run"


@pytest.fixture
def case(tmp_path):
    """Inputs in tmp_path/in, outputs (to be) in tmp_path/out, and the expected outputs' bytes."""
    rng = np.random.default_rng(0)
    dy = rng.integers(-10, 10, SHAPE).astype(np.float32)
    rfg = rng.integers(-10, 10, SHAPE).astype(np.float32)
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    dy.tofile(tmp_path / "in" / "dy.bin")
    rfg.tofile(tmp_path / "in" / "rfg.bin")

    class Case:
        root, out = tmp_path, tmp_path / "out"
        gamma = (dy * rfg).sum((0, 1)).astype(np.float32).tobytes()
        beta = dy.sum((0, 1)).astype(np.float32).tobytes()
        args = ["run", "--dy", str(tmp_path / "in" / "dy.bin"), "--res-for-gamma",
                str(tmp_path / "in" / "rfg.bin"), "--shape", ",".join(map(str, SHAPE)),
                "--out-dir", str(tmp_path / "out")]

        def old_outputs(self):
            (self.out / GAMMA).write_bytes(OLD_GAMMA)
            (self.out / BETA).write_bytes(OLD_BETA)

    return Case()


def run(capsys, args):
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def snapshot(directory):
    """Everything in `directory` (not following symlinks): names, kinds, bytes, modes, inodes."""
    state = {}
    for entry in os.scandir(directory):
        st = entry.stat(follow_symlinks=False)
        if entry.is_symlink():
            state[entry.name] = ("link", os.readlink(entry.path))
        elif entry.is_dir(follow_symlinks=False):
            state[entry.name] = ("dir", sorted(os.listdir(entry.path)))
        else:
            with open(entry.path, "rb") as file:
                state[entry.name] = ("file", file.read(), stat.S_IMODE(st.st_mode), st.st_ino)
    return state


def assert_failed_and_unchanged(status, out, err, before, directory):
    assert status == 2
    assert err.startswith("lngb run: ") and err.count("\n") == 1
    assert "wrote" not in out
    assert snapshot(directory) == before  # same bytes, same files, no temporaries left behind


# 1. an out-dir holding a directory named like an output


@pytest.mark.parametrize("old", [False, True], ids=["no-old-outputs", "old-gamma"])
@pytest.mark.parametrize("name", [BETA, GAMMA])
def test_a_directory_named_like_an_output_writes_neither(case, capsys, name, old):
    """Reproduction: a directory named output_pd_beta.bin gave exit 2 after output_pd_gamma.bin
    had been written anyway."""
    if old and name == BETA:
        (case.out / GAMMA).write_bytes(OLD_GAMMA)
    (case.out / name).mkdir()
    (case.out / name / "keep").write_bytes(b"x")
    before = snapshot(case.out)
    status, out, err = run(capsys, case.args)
    assert_failed_and_unchanged(status, out, err, before, case.out)
    assert err.startswith("lngb run: IsADirectoryError: [Errno 21] ")
    assert f"{name} is a directory; no output was changed" in err


# 2. a stale output from an earlier run that cannot be written


def _read_only_file(case):
    os.chmod(case.out / BETA, 0o444)
    try:
        os.close(os.open(case.out / BETA, os.O_WRONLY))  # no O_TRUNC: changes nothing
    except PermissionError:
        return None
    return (f"uid {os.geteuid()} can write a 0444 file (root / CAP_DAC_OVERRIDE): mode bits do "
            "not make it unwritable for this user; the immutable and dangling-symlink cases cover it")


def _read_only_file_in_read_only_dir(case):
    os.chmod(case.out / BETA, 0o444)
    os.chmod(case.out, 0o555)
    probe = case.out / "probe"
    try:
        probe.write_bytes(b"")
    except PermissionError:
        return None
    probe.unlink()
    return (f"uid {os.geteuid()} can create files in a 0555 directory (root / CAP_DAC_OVERRIDE): "
            "mode bits do not stop this user; the immutable and dangling-symlink cases cover it")


def _immutable_file(case):
    """chattr +i: no write, rename over or unlink, even for root (needs CAP_LINUX_IMMUTABLE)."""
    if shutil.which("chattr") is None:
        return "no chattr here to make a file immutable"
    done = subprocess.run(["chattr", "+i", str(case.out / BETA)], capture_output=True, text=True)
    if done.returncode:
        return f"chattr +i is not permitted here ({done.stderr.strip()})"
    try:
        os.close(os.open(case.out / BETA, os.O_WRONLY))
    except PermissionError:
        return None
    return "chattr +i did not stop writes here"


def _dangling_symlink(case):
    """The old output is a symlink into a directory that has since gone: unwritable for anyone."""
    gone = case.root / "gone"
    os.unlink(case.out / BETA)
    os.symlink(gone / BETA, case.out / BETA)
    return None


@pytest.mark.parametrize("make_unwritable", [_read_only_file, _read_only_file_in_read_only_dir,
                                             _immutable_file, _dangling_symlink],
                         ids=["0444-file", "0444-file-in-0555-dir", "immutable", "dangling-symlink"])
def test_a_stale_unwritable_output_leaves_both_old_files(case, capsys, make_unwritable):
    """Reproduction: an unwritable output_pd_beta.bin from an earlier run gave exit 2 with the new
    output_pd_gamma.bin beside the stale beta."""
    case.old_outputs()
    try:
        reason = make_unwritable(case)
        if reason:
            pytest.skip(reason)
        before = snapshot(case.out)
        status, out, err = run(capsys, case.args)
        assert_failed_and_unchanged(status, out, err, before, case.out)
        assert "no output was changed" in err
        assert (case.out / GAMMA).read_bytes() == OLD_GAMMA
    finally:  # let pytest remove tmp_path
        os.chmod(case.out, 0o755)
        if make_unwritable is _immutable_file:
            subprocess.run(["chattr", "-i", str(case.out / BETA)], capture_output=True)


# 3. an output that is a symlink to /dev/full


needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")


@needs_dev_full
@pytest.mark.parametrize("name", [BETA, GAMMA])
def test_a_write_error_through_a_symlink_to_dev_full_is_reported(case, capsys, name):
    """Reproduction: output_pd_beta.bin -> /dev/full gave exit 0 and "wrote ..." (ndarray.tofile
    does not see the error). Outputs are written through symlinks, so the bytes go to the device,
    which fails with ENOSPC: exit 2, and the other output is left as it was."""
    case.old_outputs()
    os.unlink(case.out / name)
    os.symlink("/dev/full", case.out / name)
    before = snapshot(case.out)
    status, out, err = run(capsys, case.args)
    assert_failed_and_unchanged(status, out, err, before, case.out)
    assert err.startswith(f"lngb run: OSError: [Errno {errno.ENOSPC}] cannot write ")
    assert f"{name} (-> /dev/full): No space left on device; no output was changed" in err


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null here")
def test_an_output_linked_to_a_device_is_written_there(case, capsys):
    """The same rule where the device takes the bytes: success, the link stays a link."""
    case.old_outputs()
    os.unlink(case.out / BETA)
    os.symlink("/dev/null", case.out / BETA)
    status, out, err = run(capsys, case.args)
    assert status == 0 and err == "" and "wrote" in out
    assert os.readlink(case.out / BETA) == "/dev/null"
    assert (case.out / GAMMA).read_bytes() == case.gamma


def test_an_output_linked_to_a_file_updates_that_file_and_keeps_the_link(case, capsys):
    elsewhere = case.root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "beta.bin").write_bytes(OLD_BETA)
    os.chmod(elsewhere / "beta.bin", 0o640)
    os.symlink(elsewhere / "beta.bin", case.out / BETA)
    status, out, err = run(capsys, case.args)
    assert status == 0 and err == ""
    assert os.readlink(case.out / BETA) == str(elsewhere / "beta.bin")
    assert (elsewhere / "beta.bin").read_bytes() == case.beta
    assert stat.S_IMODE(os.stat(elsewhere / "beta.bin").st_mode) == 0o640
    assert sorted(os.listdir(elsewhere)) == ["beta.bin"]


def test_two_outputs_leading_to_the_same_file_are_refused(case, capsys):
    """output_pd_beta.bin -> output_pd_gamma.bin: one would silently overwrite the other."""
    case.old_outputs()
    os.unlink(case.out / BETA)
    os.symlink(GAMMA, case.out / BETA)
    before = snapshot(case.out)
    status, out, err = run(capsys, case.args)
    assert_failed_and_unchanged(status, out, err, before, case.out)
    assert "are the same file; no output was changed" in err


# 4. a directory given as an input


@pytest.mark.parametrize("option, what", [("--dy", "inputDy"), ("--res-for-gamma", "resForGamma"),
                                          ("--golden-gamma", "golden pdGamma"),
                                          ("--golden-beta", "golden pdBeta")])
def test_a_directory_given_as_an_input_is_named_as_one(case, capsys, monkeypatch, option, what):
    """Reproduction: `--dy .` said "file . has 4096 bytes"."""
    monkeypatch.chdir(case.root)
    args = list(case.args)
    if option in args:
        args[args.index(option) + 1] = "."
    else:
        args += [option, "."]
    before = snapshot(case.out)
    status, out, err = run(capsys, args)
    assert_failed_and_unchanged(status, out, err, before, case.out)
    assert err == (f"lngb run: IsADirectoryError: [Errno 21] {what} file . is a directory, "
                   "not a .bin file\n")


def test_an_input_can_be_a_pipe(case, capsys):
    fifo = case.root / "dy.fifo"
    os.mkfifo(fifo)
    data = (case.root / "in" / "dy.bin").read_bytes()
    writer = threading.Thread(target=lambda: fifo.write_bytes(data), daemon=True)
    writer.start()
    args = list(case.args)
    args[args.index("--dy") + 1] = str(fifo)
    status, out, err = run(capsys, args)
    writer.join(10)
    assert status == 0 and err == ""
    assert (case.out / GAMMA).read_bytes() == case.gamma
    assert (case.out / BETA).read_bytes() == case.beta


# the window between the two renames, and every other write checked


def _failing_replace(monkeypatch, fail):
    real_replace = os.replace

    def replace(src, dst):
        if fail(os.fspath(src), os.fspath(dst)):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("old", [True, False], ids=["old-outputs", "no-old-outputs"])
def test_the_second_rename_failing_puts_the_first_output_back(case, capsys, monkeypatch, old):
    """The renames are the last step; if the second fails, the first output's backup (a hard link
    to the old file) is renamed back, or the new file removed if there was none."""
    if old:
        case.old_outputs()
    before = snapshot(case.out)
    _failing_replace(monkeypatch, lambda src, dst: dst.endswith(os.sep + BETA))
    status, out, err = run(capsys, case.args)
    assert_failed_and_unchanged(status, out, err, before, case.out)  # the same inode, even
    assert f"cannot write pdBeta to {case.out / BETA}: Input/output error; no output was changed" in err


def test_when_restoring_fails_too_the_message_says_which_output_is_new(case, capsys, monkeypatch):
    case.old_outputs()
    _failing_replace(monkeypatch, lambda src, dst: dst.endswith(os.sep + BETA) or src.endswith(".old"))
    status, out, err = run(capsys, case.args)
    assert status == 2 and "wrote" not in out
    assert f"pdGamma in {case.out / GAMMA} is the new one (restoring the old failed: " in err
    assert err.rstrip().endswith("; the other outputs were not changed")
    assert (case.out / GAMMA).read_bytes() == case.gamma
    assert (case.out / BETA).read_bytes() == OLD_BETA


def test_an_fsync_failure_is_a_failed_write(case, capsys, monkeypatch):
    case.old_outputs()
    before = snapshot(case.out)
    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 2:  # the second output's temporary file
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", fsync)
    status, out, err = run(capsys, case.args)
    assert_failed_and_unchanged(status, out, err, before, case.out)
    assert "cannot write pdBeta" in err and "no output was changed" in err


def test_short_writes_are_completed(case, capsys, monkeypatch):
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    status, out, err = run(capsys, case.args)
    assert status == 0 and err == ""
    assert (case.out / GAMMA).read_bytes() == case.gamma
    assert (case.out / BETA).read_bytes() == case.beta


def test_a_write_making_no_progress_is_an_error(case, capsys, monkeypatch):
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    status, out, err = run(capsys, case.args)
    assert status == 2 and "made no progress" in err and "wrote" not in out
    assert os.listdir(case.out) == []


def test_success_replaces_outputs_keeping_their_modes_and_leaves_no_temporaries(case, capsys):
    umask = os.umask(0o022)
    try:
        assert run(capsys, case.args)[0] == 0
        assert sorted(os.listdir(case.out)) == [BETA, GAMMA]
        assert stat.S_IMODE(os.stat(case.out / GAMMA).st_mode) == 0o644  # as open() would make it
        os.chmod(case.out / GAMMA, 0o600)
        (case.out / GAMMA).write_bytes(OLD_GAMMA)
        status, out, err = run(capsys, case.args)
    finally:
        os.umask(umask)
    assert status == 0 and err == "" and "wrote" in out
    assert sorted(os.listdir(case.out)) == [BETA, GAMMA]
    assert stat.S_IMODE(os.stat(case.out / GAMMA).st_mode) == 0o600
    assert (case.out / GAMMA).read_bytes() == case.gamma
    assert (case.out / BETA).read_bytes() == case.beta


def test_an_interrupt_between_the_renames_is_undone(case, capsys, monkeypatch):
    """Not an OSError: still undone, and re-raised as it was."""
    case.old_outputs()
    before = snapshot(case.out)
    real_replace = os.replace

    def replace(src, dst):
        if os.fspath(dst).endswith(os.sep + BETA):
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        main(case.args)
    assert snapshot(case.out) == before


# every file lngb writes goes through the same all-or-nothing writer


def _trace_text(path):
    assert main(["trace", "--shape", "1,8,64", "--out", str(path)]) == 0


def _trace_jsonl(path):
    assert main(["trace", "--shape", "1,8,64", "--format", "jsonl", "--out", str(path)]) == 0


def _trace_chrome(path):
    assert main(["trace", "--shape", "1,8,64", "--format", "chrome", "--out", str(path)]) == 0


def _cost_chrome(path):
    import lngb
    lngb.emulate(np.ones((1, 8, 64), np.float32), np.ones((1, 8, 64), np.float32),
                 trace=True).cost.write_chrome_trace(path)


def _sweep_csv(path):
    assert main(["sweep", "--shape", "1,8,64", "--quiet", "--csv", str(path)]) == 0


@pytest.mark.parametrize("write", [_trace_text, _trace_jsonl, _trace_chrome, _cost_chrome, _sweep_csv])
def test_every_writer_leaves_the_old_file_whole_when_the_write_fails(tmp_path, capsys, monkeypatch,
                                                                     write):
    path = tmp_path / "old.out"
    path.write_bytes(b"an earlier result")
    write(path)  # works, and replaces the file
    capsys.readouterr()
    assert path.read_bytes() != b"an earlier result"
    path.write_bytes(b"an earlier result")

    def fail(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises((OSError, AssertionError)):
        write(path)
    assert path.read_bytes() == b"an earlier result"
    assert sorted(os.listdir(tmp_path)) == ["old.out"]


# --api layer-norm-grad and backward


@pytest.mark.parametrize("api", ["layer-norm-grad", "backward"])
@pytest.mark.parametrize("product", ["atlas-a2", "atlas-inference", "atlas-350"])
def test_demo_of_layer_norm_grad_gives_the_kernels_bits(api, product, capsys):
    assert main(["demo", "--api", api, "--product", product]) == 0
    out = capsys.readouterr().out
    assert "40438222 3edf60d8 bfa799d8 c00ba8f5 c00ba800 bfa79418 3edf8720 404388d0" in out
    assert "matches the kernel's bits" in out


@pytest.mark.parametrize("api, outputs", [
    ("layer-norm-grad", ("output_pd_x.bin", "output_res_for_gamma.bin")),
    ("backward", ("output_pd_x.bin", "output_pd_gamma.bin", "output_pd_beta.bin"))])
def test_run_layer_norm_grad_on_bin_files(api, outputs, tmp_path, capsys):
    import naive
    from test_layer_norm_grad import inputs
    shape = (2, 8, 32)
    data = inputs(shape, np.float32)
    paths = {}
    for name, array in zip(("dy", "x", "variance", "mean", "gamma"), data):
        paths[name] = tmp_path / f"{name}.bin"
        array.tofile(paths[name])
    args = ["run", "--api", api, "--shape", "2,8,32", "--out-dir", str(tmp_path / "out")]
    for name, path in paths.items():
        args += [f"--{name}", str(path)]
    assert main(args) == 0
    assert sorted(os.listdir(tmp_path / "out")) == sorted(outputs)
    pd_x, rfg = naive.layer_norm_grad(*data, 1e-5)
    got = np.fromfile(tmp_path / "out" / "output_pd_x.bin", np.float32).reshape(shape)
    assert np.array_equal(got.view(np.uint32), pd_x.view(np.uint32))
    if api == "layer-norm-grad":
        got = np.fromfile(tmp_path / "out" / "output_res_for_gamma.bin", np.float32)
        assert np.array_equal(got.view(np.uint32), rfg.reshape(-1).view(np.uint32))
    assert main(args[:-2]) == 2          # no --gamma
    assert "needs --gamma" in capsys.readouterr().err
