from datetime import UTC, datetime

import pytest

from memoryproject.errors import ApplicationError
from memoryproject.timeutil import iso, parse_aware_datetime


def test_z_and_offsets_become_utc():
    assert parse_aware_datetime("2026-04-20T02:00:00+02:00", field="valid_from") == datetime(
        2026, 4, 20, tzinfo=UTC
    )
    assert iso(parse_aware_datetime("2026-04-20T00:00:00Z", field="x")) == "2026-04-20T00:00:00Z"


@pytest.mark.parametrize("bad", ["2026-04-20T00:00:00", "yesterday", "2026-13-01T00:00:00Z", 17])
def test_naive_or_malformed_names_the_field(bad):
    with pytest.raises(ApplicationError) as info:
        parse_aware_datetime(bad, field="as_of")
    assert info.value.field == "as_of"
    assert info.value.message.startswith("as_of:")
