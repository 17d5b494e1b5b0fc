"""Progress bars for long jobs (sweeps, operator runs core by core): tqdm on stderr."""
import sys


def progress_bar(total, desc, enabled, unit="config"):
    """A tqdm bar on stderr (rate, ETA; `set_postfix_str` names the current case), or a silent
    one."""
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, leave=False,
                file=sys.stderr, dynamic_ncols=True)
