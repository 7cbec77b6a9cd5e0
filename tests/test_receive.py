"""``headlab receive-sitting``: a sitting's returned tarball into results/published/, its
publication only, checked as the tables and the GPU plan read it, never half in place."""
from __future__ import annotations

import csv
import gzip
import io
import json
import tarfile
import zlib
from pathlib import Path

import pytest

from headlab.errors import DataError, HeadlabError
from headlab.workflow import gpu_measures, gpu_plan, receive

SITTING = "results/published/A-T1-deep/2026-12-01-h100-aaaaaaa"
HEADS = ("8L", "7Ftoken+1L", "8Ftoken")


def _rows(seed: int = 3, bleu: str = "36.1", status: str = "deadline", step: str = "2800",
          changed: dict[int, dict] | None = None) -> str:
    """8L's and 7Ftoken+1L's rows scored, 8Ftoken's not (partial, as a sitting writes a row
    it has not scored: no seed of its model); ``changed``: line -> cells written instead."""
    handle = io.StringIO()
    writer = csv.DictWriter(handle, gpu_plan.ROW_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for line, heads in enumerate(HEADS, start=2):
        scored = heads != "8Ftoken" and bleu
        writer.writerow({"slice": "A-T1-deep", "sitting": SITTING.rsplit("/", 1)[1], "study": "paper_A", "table": "T1",
                         "row": "T5 deep" if heads == "8Ftoken" else "T1 deep", "heads": heads, "layers": "6+6", "pair": "de-en", "seed": seed,
                         "test": "test_2016_flickr", "step": step, "best_step": "2600",
                         "status": status if scored or status not in ("converged", "deadline") else "partial",
                         "bleu": bleu if scored else "", "gpu": "h100", "commit": "aaaaaaa", "date": "2026-12-01",
                         **(changed or {}).get(line, {})})
    return handle.getvalue()


def _files(**changed) -> dict[str, str]:
    files = {f"{SITTING}/rows.csv": _rows(),
             f"{SITTING}/provenance.json": json.dumps({"slice": "A-T1-deep", "status": "partial",
                                                       "created": "2026-12-01 10:00:00 UTC",
                                                       "lacks": ["BLEU of 8Ftoken: not translated"]}),
             f"{SITTING}/learning_curve.8L.csv": "step,split,xent,ppl,acc,lr\n100,train,5.9,364.2,23.8,0.00014\n"
                                                 "200,valid,5.1,164.0,30.1,0.00028\n",
             f"{SITTING}/throughput.csv": "gpu,slice,sitting,model,models_side_by_side,step_ms,start_first_batch_s\n"
                                          "h100,A-T1-deep,x,8L,3,131,50\n",
             f"{SITTING}/atlas/8L/heads.csv": "layer,head\n0,0\n",
             "logs/gpu-tests.log": "the suite's log\n", "train-logs/8L.log": "a training log\n"}
    files.update(changed)
    return {name: text for name, text in files.items() if text is not None}


def _tarball(folder: Path, files: dict[str, str], status: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "headlab-sitting.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    if status is not None:
        (folder / "status.json").write_text(json.dumps(status))
    return path


def test_a_sittings_publication_joins_the_published_tree_and_nothing_else(tmp_path, capsys):
    published = tmp_path / "published"
    tarball = _tarball(tmp_path / "out", _files())
    target = receive.receive(tarball, published)
    assert target == published / "A-T1-deep/2026-12-01-h100-aaaaaaa"
    assert sorted(str(path.relative_to(published)) for path in published.rglob("*") if path.is_file()) == [
        "A-T1-deep/2026-12-01-h100-aaaaaaa/atlas/8L/heads.csv", "A-T1-deep/2026-12-01-h100-aaaaaaa/learning_curve.8L.csv",
        "A-T1-deep/2026-12-01-h100-aaaaaaa/learning_curves.png", "A-T1-deep/2026-12-01-h100-aaaaaaa/provenance.json",
        "A-T1-deep/2026-12-01-h100-aaaaaaa/rows.csv", "A-T1-deep/2026-12-01-h100-aaaaaaa/throughput.csv",
        "A-T1-deep/learning_curves.png", "throughput.csv"]
    assert (target / "rows.csv").read_text() == _rows()
    # the plan now counts seed 3 (its rows, 2,800 steps), and the accumulated speed table has the row
    states = gpu_plan.seed_states(gpu_plan.load().slice("A-T1-deep"), published)
    assert states.never_run == [1, 2] and 3 in states.short + states.at_limit
    assert (published / "throughput.csv").read_text().splitlines()[1].startswith("h100,,,A-T1-deep,x,8L,")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"headlab receive-sitting: {target}: partial, lacks: BLEU of 8Ftoken: not translated"
    assert out[1].startswith("  queue: A-T1-deep ") and "never run [1, 2]" in out[1]
    # what compiling would buy the next sitting: this one's probe did not compile its model
    assert out[-2] == ("  compile: no published sitting's probe has compiled its model yet; the plan trains eager "
                       "(sitting.compile off)")
    assert out[-1] == (f"  commit: git add {target} {target.parent / 'learning_curves.png'} "
                       f"{published / 'throughput.csv'}")
    # again: the folder is kept, unless --replace; a replacement publishing less is refused
    with pytest.raises(HeadlabError, match=r"2026-12-01-h100-aaaaaaa exists; a later call's tarball .* --replace"):
        receive.receive(tarball, published)
    fewer = _tarball(tmp_path / "out2", _files(**{f"{SITTING}/rows.csv": _rows(bleu="")}))
    with pytest.raises(HeadlabError, match="has BLEU for 0 row.s., .* for 2: it would publish less"):
        receive.receive(fewer, published, replace=True)
    assert (target / "rows.csv").read_text() == _rows()
    more = _tarball(tmp_path / "out3", _files(**{f"{SITTING}/rows.csv": _rows(bleu="36.2"),
                                                  f"{SITTING}/atlas/8L/heads.csv": None}))
    receive.receive(more, published, replace=True)
    assert "36.2" in (target / "rows.csv").read_text() and not (target / "atlas").exists()
    # no scratch folder is left, whatever happened
    assert sorted(path.name for path in published.iterdir()) == ["A-T1-deep", "throughput.csv"]
    assert sorted(path.name for path in target.parent.iterdir()) == [target.name, "learning_curves.png"]


def test_the_publication_is_the_one_its_status_names(tmp_path):
    other = "results/published/A-T1-deep/2026-12-01-h100-bbbbbbb"
    files = {**_files(), **{name.replace(SITTING, other): text.replace("-aaaaaaa,", "-bbbbbbb,")   # its rows' sitting
                            for name, text in _files().items() if name.startswith(SITTING)}}
    with pytest.raises(DataError, match=r"2 publications in it \(.*aaaaaaa, .*bbbbbbb\) and no status.json"):
        receive.receive(_tarball(tmp_path / "out", files), tmp_path / "published")
    tarball = _tarball(tmp_path / "named", files, {"publication": other})
    assert receive.receive(tarball, tmp_path / "published").name == "2026-12-01-h100-bbbbbbb"
    with pytest.raises(DataError, match=r"no publication in it .* the sitting published nothing"):
        receive.receive(_tarball(tmp_path / "none", {"logs/gpu-tests.log": "x\n"}), tmp_path / "published")


@pytest.mark.parametrize("changed, message", [
    ({f"{SITTING}/rows.csv": _rows(status="done")}, "results/published/A-T1-deep/2026-12-01-h100-aaaaaaa/rows.csv: "
                                                      "status 'done' is none of converged, deadline, partial, diverged"),
    ({f"{SITTING}/rows.csv": _rows(step="2,800")}, "rows.csv:2: [step] step '2,800' is not a number of training steps"),
    ({f"{SITTING}/rows.csv": "slice,sitting,heads\nA-T1-deep,x,8L\n"}, "published rows lack the column(s) study, table"),
    ({f"{SITTING}/rows.csv": None}, "2026-12-01-h100-aaaaaaa/rows.csv is missing: not a publication"),
    ({f"{SITTING}/provenance.json": "{"}, "provenance.json is not JSON"),
    ({f"{SITTING}/provenance.json": json.dumps({"slice": "C-core-base", "status": "deadline"})},
     "provenance.json: slice 'C-core-base' and status 'deadline', where the folder's slice is 'A-T1-deep'"),
    ({f"{SITTING}/throughput.csv": "gpu,models_side_by_side,step_ms\nh100,3,fast\n"},
     "throughput.csv:2: [step_ms] step_ms 'fast' is not a positive number"),
])
def test_a_bad_publication_is_one_line_naming_the_tarball_and_member_and_leaves_nothing(tmp_path, changed, message):
    tarball = _tarball(tmp_path / "out", _files(**changed))
    with pytest.raises(DataError) as caught:
        receive.receive(tarball, tmp_path / "published")
    text = str(caught.value)
    assert text.startswith(f"{tarball}: ") and message in text and "\n" not in text and ".receive." not in text
    assert list((tmp_path / "published").rglob("*")) == []


ROWS = f"{SITTING}/rows.csv"


@pytest.mark.parametrize("changed, message", [
    # rows of another slice or sitting in this folder: the tables would group them by the
    # column, the plan counts them by the folder
    ({2: {"slice": "C-core-base"}}, f"{ROWS}:2: [slice] slice 'C-core-base', where the folder's slice is "
                                    f"'A-T1-deep' (<slice>/<sitting>/rows.csv holds that slice's and sitting's rows "
                                    f"only)"),
    ({3: {"sitting": "2026-11-27-h100-993e600"}},
     f"{ROWS}:3: [sitting] sitting '2026-11-27-h100-993e600', where the folder's sitting is "
     f"'2026-12-01-h100-aaaaaaa' (<slice>/<sitting>/rows.csv holds that slice's and sitting's rows only)"),
    # a score that is no number: the tables would fail on it in make run, naming no file
    ({2: {"bleu": "n/a"}}, f"{ROWS}:2: [bleu] bleu 'n/a' is not a number (a score is empty or a finite number, "
                           f"written with a decimal point)"),
    ({3: {"bleu_ci_low": "36,8"}}, f"{ROWS}:3: [bleu_ci_low] bleu_ci_low '36,8' is not a number (a score is empty "
                                   f"or a finite number, written with a decimal point)"),
    ({2: {"chrf": "inf"}}, f"{ROWS}:2: [chrf] chrf 'inf' is not a number (a score is empty or a finite number, "
                           f"written with a decimal point)"),
    # a seed of its model without BLEU: the tables would average NaN in silently
    ({4: {"status": "deadline"}}, f"{ROWS}:4: [bleu] bleu is empty in a row of status deadline, a seed of its "
                                  f"model: a row not scored on the whole test set is partial"),
    # a row its slice's plan does not name: the queue would never count it (its seed trained
    # again for ever) and the table would show it under a label no paper row has
    ({2: {"row": "T1 shallow"}}, f"{ROWS}:2: [row] row 'T1 shallow' of heads '8L' is none of slice A-T1-deep's "
                                 f"in config/gpu-plan.yaml (T1 deep: 7Ftoken+1L, 8L; T5 deep: 8Ftoken): the queue "
                                 f"would not count it"),
    ({3: {"heads": "8Fword"}}, f"{ROWS}:3: [heads] row 'T1 deep' of heads '8Fword' is none of slice A-T1-deep's "
                               f"in config/gpu-plan.yaml (T1 deep: 7Ftoken+1L, 8L; T5 deep: 8Ftoken): the queue "
                               f"would not count it"),
    ({2: {"pair": "en-de"}}, f"{ROWS}:2: [pair] pair 'en-de', where slice A-T1-deep of config/gpu-plan.yaml "
                             f"trains 'de-en'"),
    ({4: {"layers": "2+2"}}, f"{ROWS}:4: [layers] layers '2+2', where slice A-T1-deep of config/gpu-plan.yaml "
                             f"trains '6+6'"),
    ({2: {"table": "T2"}}, f"{ROWS}:2: [table] table 'T2', where slice A-T1-deep of config/gpu-plan.yaml "
                           f"trains 'T1'"),
    ({2: {"study": "paper_C"}}, f"{ROWS}:2: [study] study 'paper_C', where slice A-T1-deep of config/gpu-plan.yaml "
                                f"trains 'paper_A'"),
])
def test_a_row_of_another_folder_or_a_score_that_is_no_number_is_one_line_naming_the_line_and_column(
        tmp_path, changed, message):
    tarball = _tarball(tmp_path / "out", _files(**{ROWS: _rows(changed=changed)}))
    with pytest.raises(DataError) as caught:
        receive.receive(tarball, tmp_path / "published")
    assert str(caught.value) == f"{tarball}: {message}"
    assert list((tmp_path / "published").rglob("*")) == []


def test_a_sitting_folder_packed_from_elsewhere_is_named_as_such(tmp_path):
    """``tar -C results/published/A-T1-deep -czf x.tar.gz <sitting>``: the sitting folder is
    there, not where receive looks; saying the sitting published nothing would mislead."""
    sitting = SITTING.rsplit("/", 1)[1]
    for prefix, where in (("", sitting), ("./", sitting), ("results/", f"results/{sitting}")):
        files = {f"{prefix}{name.replace(SITTING, sitting)}": text for name, text in _files().items()
                 if name.startswith(SITTING)}
        tarball = _tarball(tmp_path / f"out{len(where)}{prefix[:1]}", files)
        with pytest.raises(DataError) as caught:
            receive.receive(tarball, tmp_path / "published")
        assert str(caught.value) == (f"{tarball}: it holds a sitting folder at {where}, not under "
                                     f"results/published/<slice>/<sitting>/: pack it from the checkout's root")
    assert not (tmp_path / "published").exists() or list((tmp_path / "published").rglob("*")) == []


@pytest.mark.parametrize("name, kind, target", [
    ("escape", tarfile.SYMTYPE, "/etc/passwd"),                   # out of it
    ("up", tarfile.SYMTYPE, "../../../../x"),                     # inside the scratch folder, out of the tree
    ("hard", tarfile.LNKTYPE, f"{SITTING}/rows.csv"),              # a hard link inside it
    ("../../../../../evil", tarfile.REGTYPE, "")])                # a path out of it
def test_a_link_or_a_path_out_of_the_publication_is_refused(tmp_path, name, kind, target):
    tarball = tmp_path / "evil.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for member, text in _files().items():
            info = tarfile.TarInfo(member)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
        odd = tarfile.TarInfo(f"{SITTING}/{name}")
        odd.type, odd.linkname = kind, target
        tar.addfile(odd)
    with pytest.raises(DataError, match=r"is no plain file or folder inside it \(a link, a device, a path out of it\)"):
        receive.receive(tarball, tmp_path / "published")
    assert list((tmp_path / "published").rglob("*")) == [] and not (tmp_path / "evil").exists()


def test_a_file_that_is_no_tarball_is_one_line(tmp_path):
    whole = _tarball(tmp_path / "out", _files()).read_bytes()
    # the first deflate block's type set to 3, which deflate reserves: zlib refuses it
    damaged = bytearray(whole)
    start = whole.index(b"\0", 10) + 1 if whole[3] & 8 else 10     # past the header's file name
    damaged[start] |= 0b110
    broken = {"missing.tar.gz": None, "text.tar.gz": b"not gzip\n", "empty.tar.gz": b"",
              "cut.tar.gz": whole[:len(whole) // 2],      # a copy cut short: gzip's EOFError inside tarfile
              "damaged.tar.gz": bytes(damaged), "gzip-of-text.tar.gz": gzip.compress(b"hello\n")}
    said = {}
    for name, data in broken.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
        with pytest.raises(DataError) as caught:
            receive.receive(tmp_path / name, tmp_path / "published")
        said[name] = str(caught.value)
        assert "\n" not in said[name] and said[name].startswith(f"{tmp_path / name}: not a sitting's tarball")
    assert said["missing.tar.gz"].endswith("(No such file or directory)")
    assert said["text.tar.gz"].endswith(": no tar archive (plain, gzip, bzip2 or xz): truncated header")
    assert said["empty.tar.gz"].endswith(": an empty file")
    assert said["cut.tar.gz"].endswith(": it ends early (a copy cut short?)")
    assert said["damaged.tar.gz"].endswith(": damaged gz data: zlib error: Error -3 while decompressing data: "
                                           "invalid block type")
    assert said["gzip-of-text.tar.gz"].endswith(": gz data, but no tar archive inside it (truncated header)")
    assert not list((tmp_path / "published").rglob("*"))      # no scratch folder left behind either


def test_a_byte_changed_inside_a_stored_deflate_block_is_found_by_gzips_crc(tmp_path):
    """zlib cannot see a changed byte in a stored (uncompressed) block, and tarfile stops
    before gzip's trailer, whose CRC-32 would: the tarball is read to its end, so that the
    check runs, and nothing is published from it."""
    files = _files()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    whole = bytearray(gzip.compress(raw.getvalue(), compresslevel=0, mtime=0))    # stored blocks only
    where = whole.index(b"200,valid,5.1")
    whole[where + 4] ^= 0b1                     # 'valid' becomes 'walid': still a plain CSV
    tarball = tmp_path / "stored.tar.gz"
    tarball.write_bytes(bytes(whole))
    with tarfile.open(tarball) as tar:            # what tarfile alone reads: the change, no error
        assert b"200,walid" in tar.extractfile(f"{SITTING}/learning_curve.8L.csv").read()
    with pytest.raises(DataError) as caught:
        receive.receive(tarball, tmp_path / "published")
    changed = bytearray(raw.getvalue())           # the tar as unpacked, with the same byte changed
    changed[changed.index(b"200,valid,5.1") + 4] ^= 0b1
    assert str(caught.value) == (f"{tarball}: not a sitting's tarball: damaged gz data: CRC check failed "
                                 f"{hex(zlib.crc32(raw.getvalue()))} != {hex(zlib.crc32(changed))}")
    assert not list((tmp_path / "published").rglob("*"))


def test_members_written_with_a_leading_dot_are_the_same_publication(tmp_path):
    """``tar -C dir .`` writes ``./results/published/...``."""
    tarball = _tarball(tmp_path / "out", {f"./{name}": text for name, text in _files().items()})
    target = receive.receive(tarball, tmp_path / "published")
    assert (target / "rows.csv").read_text() == _rows()


def test_a_status_naming_a_publication_the_tarball_lacks_is_refused(tmp_path):
    tarball = _tarball(tmp_path / "out", _files(), {"publication": "results/published/A-T1-deep/2026-12-02-h100-b"})
    with pytest.raises(DataError, match=r"its status.json names the publication results/published/A-T1-deep/"
                                        r"2026-12-02-h100-b, which it does not hold \(it holds: " + SITTING):
        receive.receive(tarball, tmp_path / "published")


def test_the_slices_figure_shows_every_sitting_and_where_each_row_was_evaluated(tmp_path, monkeypatch):
    """The shipped A-T1-deep sittings in one figure: a training curve per model and sitting
    (3 x 3), validation curves only for 993e600's (the sittings before the stop rule had
    none), and a marker on each at its row's best_step: 8L at 2,200 (validation 1.9618),
    7Ftoken+1L at 2,000 (1.8605), 8Ftoken at 2,400 (1.8671)."""
    import shutil

    import matplotlib.figure

    from headlab.workflow import sitting_speed

    shutil.copytree(gpu_plan.PUBLISHED / "A-T1-deep", tmp_path / "A-T1-deep")
    drawn = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda figure, target, **kwargs: drawn.append(figure))
    assert sitting_speed.slice_figure(tmp_path / "A-T1-deep") == tmp_path / "A-T1-deep/learning_curves.png"
    train, valid = drawn[0].axes
    assert sum(1 for line in train.lines if len(line.get_xdata())) == 9
    assert sum(1 for line in valid.lines if len(line.get_xdata()) > 1) == 3
    markers = sorted((int(line.get_xdata()[0]), round(float(line.get_ydata()[0]), 4)) for line in valid.lines
                     if line.get_marker() == "o" and len(line.get_xdata()))
    assert markers == [(2000, 1.8605), (2200, 1.9618), (2400, 1.8671)]
    assert [text.get_text() for text in train.get_legend().get_texts()] == [
        "2026-11-26-h200-e327191 (seed 1; diverged)", "2026-11-27-h100-65e2124 (seed 1; deadline)",
        "2026-11-27-h100-993e600 (seed 2; deadline)"]
    assert sitting_speed.slice_figure(tmp_path / "none") is None


def test_a_curve_cut_short_by_the_deadline_still_receives_and_says_there_is_no_figure(tmp_path, capsys):
    cut = "step,split,xent,ppl,acc,lr\n100,train,5.9,364.2,23.8,0.00014\n200,valid,,,,\n"
    target = receive.receive(_tarball(tmp_path / "out", _files(**{f"{SITTING}/learning_curve.8L.csv": cut})),
                             tmp_path / "published")
    assert (target / "rows.csv").is_file() and (tmp_path / "published/throughput.csv").is_file()
    said = capsys.readouterr()
    assert ("no learning-curves figure" in said.out + said.err) != (target / "learning_curves.png").is_file()


def test_the_command_line_is_one_line_on_error(tmp_path, capsys):
    from headlab.cli import main

    assert main(["receive-sitting", str(tmp_path / "none.tar.gz"), "--published", str(tmp_path / "p")]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_a_replacement_that_cannot_take_its_place_puts_the_old_folder_back(tmp_path, monkeypatch):
    published = tmp_path / "published"
    target = receive.receive(_tarball(tmp_path / "out", _files()), published)
    more = _tarball(tmp_path / "out2", _files(**{f"{SITTING}/rows.csv": _rows(bleu="36.2")}))
    renamed = Path.rename

    def failing(self, destination):
        if Path(destination) == target and ".receive." in str(self) and "replaced" not in str(self):
            raise OSError("no space left on device")
        return renamed(self, destination)

    monkeypatch.setattr(Path, "rename", failing)
    with pytest.raises(OSError, match="no space left"):
        receive.receive(more, published, replace=True)
    assert (target / "rows.csv").read_text() == _rows()
    assert sorted(path.name for path in published.iterdir()) == ["A-T1-deep", "throughput.csv"]


def test_the_runners_status_is_kept_in_the_sitting_folder_and_read_as_the_plan_reads_it(tmp_path):
    """status.json beside the tarball (the call's phases and their clock) becomes the folder's
    status-sitting.json, as in every sitting folder published before the command; the plan's
    evaluation check reads it: 2 rows with BLEU, evaluate 61.5 s less the atlas's 9.5 s."""
    status = {"publication": SITTING, "calls": [{"budget_s": 570, "phases": {"evaluate": {"wall_s": 61.5}}}]}
    provenance = json.dumps({"slice": "A-T1-deep", "status": "partial", "created": "2026-12-01 10:00:00 UTC",
                             "atlas": {"wall_s": 9.5}, "lacks": ["BLEU of 8Ftoken: not translated"]})
    tarball = _tarball(tmp_path / "out", _files(**{f"{SITTING}/provenance.json": provenance}), status)
    target = receive.receive(tarball, tmp_path / "published")
    assert json.loads((target / "status-sitting.json").read_text()) == status
    assert gpu_measures.measured_evaluation(tmp_path / "published") == gpu_measures.EvaluationMeasured(
        "A-T1-deep/2026-12-01-h100-aaaaaaa", "2026-12-01 10:00:00 UTC", 2, 52.0)
    # a status whose calls are no list of calls: refused by name, nothing left
    bad = _tarball(tmp_path / "bad", _files(), {"calls": "none"})
    with pytest.raises(DataError, match=r"bad/headlab-sitting.tar.gz: results/published/A-T1-deep/2026-12-01-h100-"
                                        r"aaaaaaa/status-sitting.json: not a runner's status"):
        receive.receive(bad, tmp_path / "elsewhere")
    assert list((tmp_path / "elsewhere").rglob("*")) == []
