from datetime import UTC, datetime

import pytest

from memoryproject.timeutil import TimestampError, iso, to_utc


def test_z_and_offsets_become_utc():
    assert to_utc("2026-04-20T02:00:00+02:00") == datetime(2026, 4, 20, tzinfo=UTC)
    assert iso(to_utc("2026-04-20T00:00:00Z")) == "2026-04-20T00:00:00Z"


@pytest.mark.parametrize("bad", ["2026-04-20T00:00:00", "yesterday", "2026-13-01T00:00:00Z", 17])
def test_naive_or_malformed_is_refused(bad):
    with pytest.raises(TimestampError):
        to_utc(bad)
