"""The options every log feed shares: one rule set, each message naming the feed's kind."""

from __future__ import annotations

import pytest

from spillway.errors import ConfigError
from spillway.feeds.log_options import LogFields, flag, reject_unknown, take_log_options

GOOD = {"schema": "route string, fare double, at timestamp", "value_column": "fare"}


@pytest.mark.parametrize("kind", ["kafka", "folder"])
@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"format": "xml"}, r"option 'format' must be one of json, csv, got 'xml'"),
        ({"schema": None}, r"option 'schema' is required \(a DDL string"),
        ({"schema": "route text"}, "field 'route' has type 'text'"),
        ({"value_column": None}, r"option 'value_column' is required: one of .*records = true"),
        ({"value_column": "cost"}, "option 'value_column' names 'cost', not a field"),
        ({"key_column": "city"}, "option 'key_column' names 'city', not a field"),
        ({"time_column": "when"}, "option 'time_column' names 'when', not a field"),
        ({"time_column": "route"}, "'time_column' names 'route' of type string: it needs a"),
        ({"records": "yes"}, "option 'records' must be true or false, got 'yes'"),
        ({"lateness_s": -1}, r"option 'lateness_s' must be seconds in \[0, 3600\), got -1"),
        ({"lateness_s": True}, r"option 'lateness_s' must be seconds in \[0, 3600\), got True"),
    ],
)
def test_every_bad_shared_option_names_the_feed(kind, change, match) -> None:
    opts = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=match) as e:
        take_log_options(kind, opts, formats=("json", "csv"), lateness_s=1.0)
    # every message names the feed, but a bad DDL's (parse_schema's, shared with from_json's)
    assert str(e.value).startswith(f"{kind} option ") or "schema" in change


def test_the_shared_options_are_read_out_and_the_rest_left() -> None:
    opts = {**GOOD, "format": "CSV", "key_column": "route", "time_column": "at",
            "dead_letter": "dl", "lateness_s": 2, "path": "in"}  # fmt: skip
    o = take_log_options("kafka", opts, formats=("json", "csv"), lateness_s=1.0)
    assert opts == {"path": "in"}
    got = (o.format, o.key_column, o.time_column, o.dead_letter, o.lateness_s)
    assert got == ("csv", "route", "at", "dl", 2.0)
    assert o.text_keys and not o.records
    # a feed without lateness_s leaves it to its unknown-option check
    rest = {**GOOD, "lateness_s": 2}
    assert take_log_options("folder", rest, formats=("json",)).lateness_s is None
    assert rest == {"lateness_s": 2}


def test_value_column_may_be_left_out_only_for_records() -> None:
    o = take_log_options("folder", {"schema": "a bigint", "records": "true"}, formats=("json",))
    assert o.value_column is None and o.records
    with pytest.raises(ConfigError, match="folder option 'value_column' is required"):
        take_log_options("folder", {"schema": "a bigint", "records": False}, formats=("json",))


def test_unknown_options_and_flags() -> None:
    with pytest.raises(ConfigError, match=r"unknown kafka option\(s\) maxOffsets; known: "
                       r"subscribe and kafka\.\* client settings"):  # fmt: skip
        reject_unknown("kafka", ["kafka.acks", "maxOffsets"], ["subscribe"], prefix="kafka.")
    with pytest.raises(ConfigError, match=r"unknown folder option\(s\) a, b; known: path$"):
        reject_unknown("folder", ["b", "a", "path"], ["path"])
    assert flag("folder", "header", "FALSE") is False
    with pytest.raises(ConfigError, match="folder option 'header' must be true or false, got 1"):
        flag("folder", "header", 1)


def test_a_feed_gets_them_as_attributes() -> None:
    class F(LogFields):
        pass

    f = F()
    f.take_options("folder", {**GOOD, "key_column": "route"}, formats=("json",))
    got = (f.format, f.schema_ddl, f.value_column, f.lateness_s)
    assert got == ("json", GOOD["schema"], "fare", 0.0)
    assert f.schema.names == ["route", "fare", "at"] and f.text_keys and not f.record_fields
