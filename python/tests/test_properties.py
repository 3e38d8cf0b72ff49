"""Property tests (hypothesis, Debian's python3-hypothesis) over pipeplan_torch's command line:
whatever text an option is given, parsing either accepts a value that meets the option's rule or
raises the usage error naming the option, never another exception (issue 34)."""

import math
import unittest

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeplan_torch.__main__ import parser
from pipeplan_torch.common import UsageError

# Text of any kind, and text that looks like what users type.
TEXT = st.one_of(st.text(max_size=16),
                 st.from_regex(r"-?[0-9]{0,4}(\.[0-9]{0,3})?(e-?[0-9]{1,3})?", fullmatch=True),
                 st.sampled_from(["nan", "inf", "-inf", "0x10", "1_000", " 3", "016", "+5"]))


def parse(*argv):
    return parser().parse_args(list(argv))


class ArgumentPropertyTest(unittest.TestCase):
    def refused(self, option, argv):
        with self.assertRaises(UsageError) as caught:
            parse(*argv)
        self.assertIn(option, str(caught.exception))

    @settings(max_examples=300, deadline=None)
    @given(TEXT)
    def test_integers_are_decimal_digits_from_one(self, text):
        argv = ["probe", "--ranks", "2", "--threads", text, "-o", "t.json"]
        if text.isascii() and text.isdigit() and int(text) >= 1:
            self.assertEqual(parse(*argv).threads, int(text))
        else:
            self.refused("--threads", argv)

    @settings(max_examples=300, deadline=None)
    @given(TEXT)
    def test_timeouts_are_finite_and_positive(self, text):
        argv = ["probe", "--ranks", "2", "--timeout", text, "-o", "t.json"]
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value > 0 and not text.startswith("-"):
            self.assertEqual(parse(*argv).timeout, value)
        else:
            self.refused("--timeout", argv)

    @settings(max_examples=300, deadline=None)
    @given(st.one_of(TEXT, st.builds(lambda n, u: f"{n} {u}", st.integers(0, 10**6),
                                     st.sampled_from(["B", "GiB", "Gib", "GB", "gb", "MiB"]))))
    def test_memory_has_a_unit_pipeplan_reads(self, text):
        argv = ["probe", "--ranks", "2", "--memory", text, "-o", "t.json"]
        units = ("B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")
        number, _, unit = text.strip().rpartition(" ")
        plausible = unit in units and number.replace(".", "", 1).isdigit()
        if plausible:
            self.assertEqual(parse(*argv).memory, text)
        else:
            try:
                parse(*argv)
            except UsageError as e:
                self.assertIn("--memory", str(e))


if __name__ == "__main__":
    unittest.main()
