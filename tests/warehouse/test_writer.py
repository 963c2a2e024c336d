"""The writer keeps local tables open between commits: what it writes must be what a table opened
afresh each time would hold, also when the table changes under it."""

import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_stream_provider.warehouse import writer


def rows(keys: list[int], value: str) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array([value] * len(keys))})


def content(path) -> dict[int, str]:
    table = DeltaTable(str(path)).to_pyarrow_table()
    got = list(zip(table["k"].to_pylist(), table["v"].to_pylist(), strict=True))
    assert len(got) == len({k for k, _ in got}), got  # no key twice
    return dict(got)


def test_commits_of_another_writer_are_seen(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1, 2], "a"))
    writer.upsert(path, rows([2, 3], "b"), ["k"])
    write_deltalake(str(path), rows([4], "other"), mode="append")  # another writer, between two of ours
    commit = writer.upsert(path, rows([4, 5], "c"), ["k"])
    assert content(path) == {1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assert (commit.before, commit.version) == (2, 3)


def test_a_table_dropped_and_made_again_is_read_afresh(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1], "old"))
    for key in range(2, 5):  # the kept table is at version 3
        writer.upsert(path, rows([key], "old"), ["k"])
    shutil.rmtree(path)
    # made again, and further along than the kept table: its version 3 is another commit
    write_deltalake(str(path), rows([10], "new"))
    for key in range(11, 15):
        write_deltalake(str(path), rows([key], "new"), mode="append")
    writer.upsert(path, rows([10, 20], "upserted"), ["k"])
    assert content(path) == {10: "upserted", 11: "new", 12: "new", 13: "new", 14: "new", 20: "upserted"}
    shutil.rmtree(path)
    write_deltalake(str(path), rows([7], "again"))  # and made again behind it
    writer.upsert(path, rows([7], "upserted"), ["k"])
    assert content(path) == {7: "upserted"}


def test_after_a_failed_action_the_table_is_read_again(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1], "a"))
    writer.upsert(path, rows([2], "a"), ["k"])

    def fails(table: DeltaTable) -> None:
        table.merge(rows([3], "lost"), "t.k = s.k", source_alias="s", target_alias="t")  # not executed
        raise ValueError("the action failed")

    try:
        writer.retrying(path, fails)
    except ValueError:
        pass
    else:
        raise AssertionError("the action's error was swallowed")
    write_deltalake(str(path), rows([4], "other"), mode="append")
    assert writer.upsert(path, rows([1, 5], "b"), ["k"]).before == 2
    assert content(path) == {1: "b", 2: "a", 4: "other", 5: "b"}


@pytest.mark.parametrize("kind", [pa.timestamp("us", tz="UTC"), pa.timestamp("us"), pa.timestamp("ms", tz="UTC"),
                                  pa.int64(), pa.int32()])
def test_an_upsert_replaces_the_keys_at_both_ends_of_its_range(tmp_path, kind):
    """The MERGE reads only the files within the range of its keys: the rows at the first and the last
    key are replaced, a key between them is added, and the rows outside it stay."""
    path = tmp_path / "t"

    def keyed(times: list[int], value: str) -> pa.Table:
        return pa.table({"ts": pa.array(times, pa.int64()).cast(kind),
                         "tbname": pa.array(["d0"] * len(times)), "v": pa.array([value] * len(times))})

    for times in ([1_000, 2_000], [3_000, 4_000], [5_000, 6_000]):  # three files
        write_deltalake(str(path), keyed(times, "old"), mode="append")
    writer.upsert(path, keyed([2_000, 3_500, 5_000], "new"), ["ts", "tbname"])
    table = DeltaTable(str(path)).to_pyarrow_table()
    # (Delta keeps times in microseconds: read back in the unit written)
    got = sorted(zip(table["ts"].cast(kind).cast(pa.int64()).to_pylist(), table["v"].to_pylist(), strict=True))
    assert got == [(1_000, "old"), (2_000, "new"), (3_000, "old"), (3_500, "new"), (4_000, "old"), (5_000, "new"),
                   (6_000, "old")]


def test_a_table_written_often_is_compacted_and_reads_the_same(tmp_path, monkeypatch):
    """Every COMPACT_EVERY commits the kernel joins the table's small files: the table keeps fewer
    files than commits, holds the same rows, its change feed has no row for a compaction, and its
    versions before one stay readable."""
    monkeypatch.setattr(writer, "COMPACT_EVERY", 5)
    monkeypatch.setattr(writer, "compaction_skew", lambda path: 0)  # due on the multiples of 5
    path = tmp_path / "t"
    write_deltalake(str(path), rows([0], "v0"), configuration={"delta.enableChangeDataFeed": "true"})
    for key in range(1, 13):  # a file each
        writer.upsert(path, rows([key], f"v{key}"), ["k"])
    writer.upsert(path, rows([3, 11], "again"), ["k"])
    table = DeltaTable(str(path))
    # upserts made versions 1 to 5, 7 to 10 and 12 to 15; compactions 6, 11 and 16
    assert [h["version"] for h in table.history() if h["operation"] == "OPTIMIZE"] == [16, 11, 6]
    assert len(table.file_uris()) <= 5
    assert content(path) == {k: f"v{k}" for k in range(13)} | {3: "again", 11: "again"}
    changes = pa.table(table.load_cdf(starting_version=0).read_all())
    kinds = set(zip(changes["_change_type"].to_pylist(), changes["_commit_version"].to_pylist(), strict=True))
    optimized = {h["version"] for h in table.history() if h["operation"] == "OPTIMIZE"}
    assert not {version for _, version in kinds} & optimized
    before_first = min(optimized) - 1
    old = DeltaTable(str(path), version=before_first).to_pyarrow_table()
    assert sorted(old["k"].to_pylist()) == list(range(before_first + 1))  # (before it, upsert n made version n)


def test_two_compactions_of_a_table_never_run_at_once(tmp_path, monkeypatch):
    """The kernel commits two compactions of the same files made from one snapshot, and the table
    then holds every row twice (shown first, on tables of its own). So a compaction runs only for
    the commit that made a due version, and not while another holds the table's lock."""
    doubled = tmp_path / "doubled"
    for key in range(3):
        write_deltalake(str(doubled), rows([key], "a"), mode="append")
    first, second = DeltaTable(str(doubled)), DeltaTable(str(doubled))
    first.optimize.compact()
    second.optimize.compact()
    assert DeltaTable(str(doubled)).to_pyarrow_table().num_rows == 6  # why the lock is needed

    monkeypatch.setattr(writer, "COMPACT_EVERY", 3)
    monkeypatch.setattr(writer, "compaction_skew", lambda path: 0)  # due on the multiples of 3
    path = tmp_path / "t"
    for key in range(4):  # versions 0 to 3
        write_deltalake(str(path), rows([key], "a"), mode="append")
    writer.compact_if_due(path, 2)  # not a multiple
    with writer._compaction_lock(path) as mine:
        assert mine
        writer.compact_if_due(path, 3)  # another compaction holds the lock
    assert "OPTIMIZE" not in [h["operation"] for h in DeltaTable(str(path)).history()]
    writer.compact_if_due(path, 3)
    assert [h["operation"] for h in DeltaTable(str(path)).history()].count("OPTIMIZE") == 1
    assert content(path) == {0: "a", 1: "a", 2: "a", 3: "a"}
    writer.compact_if_due(tmp_path / "dropped", 3)  # a table dropped since its commit: nothing to do


def test_tables_written_together_are_compacted_at_different_versions():
    """Twenty streams write their output and event tables once a batch each, so the tables reach
    their versions together: each is compacted once in every COMPACT_EVERY versions, at an offset of
    its own, so that not all of them are compacted in the same batch."""
    every = writer.COMPACT_EVERY
    tables = [f"/home/warehouse/power/out{i}" for i in range(20)] + \
        [f"/home/state/power/s{i}/events" for i in range(20)]
    for table in tables:
        due = [v for v in range(3 * every) if writer.compaction_due(table, v)]
        # one writer per due version, one due version in every run of COMPACT_EVERY, none before it
        assert len(due) == 2 and due[1] - due[0] == every and every <= due[0] < 2 * every
        # every writer of the table agrees, however it names the warehouse's root
        for alias in (table + "/", "s3a://bucket" + table, "../.." + table):
            assert writer.compaction_skew(alias) == writer.compaction_skew(table)
    # forty tables spread over the fifty offsets: at most a few share a batch
    offsets = [writer.compaction_skew(table) for table in tables]
    assert max(offsets.count(o) for o in offsets) <= 4
    assert len(set(offsets)) >= 20


def test_a_commit_landing_after_another_writers_leaves_the_table_right(tmp_path):
    """Another writer commits while an append runs: the kernel commits the append after it, and the
    next upsert through the kept table still sees that writer's rows."""
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1], "a"))
    writer.upsert(path, rows([2], "a"), ["k"])  # kept from here

    def append_after_another(table: DeltaTable) -> None:
        write_deltalake(str(path), rows([3], "other"), mode="append")  # lands first
        write_deltalake(table, rows([4], "b"), mode="append")

    commit = writer.retrying(path, append_after_another)
    assert commit.version == commit.before + 2
    writer.upsert(path, rows([3, 5], "c"), ["k"])
    assert content(path) == {1: "a", 2: "a", 3: "c", 4: "b", 5: "c"}


def operations(path, after: int = 0) -> list[str]:
    """The table's commits after version ``after``, oldest first (a plain write and a MERGE told apart)."""
    history = sorted(DeltaTable(str(path)).history(), key=lambda h: h["version"])
    return [h["operation"] + (f" {h['operationParameters']['mode']}" if h["operation"] == "WRITE" else "")
            for h in history if h["version"] > after]


def test_new_keys_beyond_the_tables_are_written_without_a_merge_and_read_as_inserts(tmp_path):
    """Keys beyond every file's statistics cannot be in the table: they are appended as they are. The
    change feed reads them as inserts. The same rows written again find their range taken and MERGE:
    nothing twice."""
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1, 2], "a"), configuration={"delta.enableChangeDataFeed": "true"})
    writer.upsert(path, rows([3, 4], "b"), ["k"])
    writer.upsert(path, rows([3, 4], "b"), ["k"])  # a batch written again
    writer.upsert(path, rows([2, 5], "c"), ["k"])  # one key within the table's range
    writer.upsert(path, rows([7], "d"), ["k"])
    assert operations(path) == ["WRITE Append", "MERGE", "MERGE", "WRITE Append"]
    assert content(path) == {1: "a", 2: "c", 3: "b", 4: "b", 5: "c", 7: "d"}
    changes = pa.table(DeltaTable(str(path)).load_cdf(starting_version=1).read_all())
    kinds = sorted(zip(changes["_commit_version"].to_pylist(), changes["_change_type"].to_pylist(),
                       changes["k"].to_pylist(), strict=True))
    assert [c for c in kinds if c[0] in (1, 4)] == [(1, "insert", 3), (1, "insert", 4), (4, "insert", 7)]


def test_a_time_key_within_a_files_truncated_statistics_is_merged(tmp_path):
    """Delta keeps a file's time statistics in milliseconds, truncated: a row at 0.5 ms past a
    millisecond has a maximum statistic before it. A key equal to that row is still found and
    replaced, not written twice."""
    path = tmp_path / "t"
    at = pa.array([1_000_500], pa.int64()).cast(pa.timestamp("us", tz="UTC"))  # 1.0005 s

    def keyed(value: str) -> pa.Table:
        return pa.table({"ts": at, "v": pa.array([value])})

    write_deltalake(str(path), keyed("old"))
    stats = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    assert stats["max.ts"].cast(pa.int64()).to_pylist() == [1_000_000]  # why the slack is needed
    writer.upsert(path, keyed("new"), ["ts"])
    assert operations(path) == ["MERGE"]
    assert DeltaTable(str(path)).to_pyarrow_table()["v"].to_pylist() == ["new"]


def _another_writer_after_the_first_look(monkeypatch, other) -> list[int]:
    """Run ``other()`` right after the first look at the table's statistics; the versions looked at."""
    looked = writer._holds_none_within
    looks: list[int] = []

    def then_another_writer(table, new, ranges):
        empty = looked(table, new, ranges)
        looks.append(table.version())
        if len(looks) == 1:
            other()
        return empty

    monkeypatch.setattr(writer, "_holds_none_within", then_another_writer)
    return looks


def test_a_key_committed_by_another_writer_between_the_look_and_the_write_is_merged(tmp_path, monkeypatch):
    """Another writer adds a row within the range after the statistics showed none: the append, which
    may only follow the version it looked at, fails, and its retry MERGEs over the row."""
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1], "a"))
    # (the other writer's own upsert looks second)
    _another_writer_after_the_first_look(monkeypatch, lambda: writer.upsert(path, rows([5], "other"), ["k"]))
    commit = writer.upsert(path, rows([5, 6], "mine"), ["k"])
    assert commit.attempts == 2
    assert content(path) == {1: "a", 5: "mine", 6: "mine"}
    assert operations(path) == ["WRITE Append", "MERGE"]


def test_an_append_after_another_writers_commit_looks_again(tmp_path, monkeypatch):
    """Another writer commits outside the range after the statistics showed none: the append, which
    may only follow the version it looked at, fails; its retry looks at the table again, finds the
    range still empty, and appends."""
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1], "a"))
    looks = _another_writer_after_the_first_look(
        monkeypatch, lambda: write_deltalake(str(path), rows([9], "other"), mode="append"))
    commit = writer.upsert(path, rows([5, 6], "mine"), ["k"])
    assert commit.attempts == 2 and looks == [0, 1]
    assert content(path) == {1: "a", 5: "mine", 6: "mine", 9: "other"}
    assert operations(path) == ["WRITE Append", "WRITE Append"]


@pytest.mark.parametrize("column, kind", [("v", pa.large_string()), ("ts", pa.timestamp("us"))])
def test_rows_of_other_types_than_the_tables_are_merged(tmp_path, column, kind):
    """Rows whose columns differ from the table's (another string type, a time without a zone) go by
    MERGE, which casts them."""
    path = tmp_path / "t"
    zoned = pa.timestamp("us", tz="UTC")
    write_deltalake(str(path), pa.table({"ts": pa.array([1_000], pa.int64()).cast(zoned), "v": pa.array(["a"])}))
    new = pa.table({"ts": pa.array([2_000], pa.int64()).cast(zoned), "v": pa.array(["b"])})
    new = new.set_column(new.schema.get_field_index(column), column, new[column].cast(kind))
    writer.upsert(path, new, ["ts"])
    assert operations(path) == ["MERGE"]
    assert sorted(DeltaTable(str(path)).to_pyarrow_table()["v"].to_pylist()) == ["a", "b"]
