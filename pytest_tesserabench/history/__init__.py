"""History: baseline files (``baseline``: ``baselines/NAME/KEY.json``, the runs they keep, the
process draws a save still needs), a run a save found locked, kept to be saved later
(``unsaved``), and this session's comparison with one (``comparison``: which file, the gate's
verdicts for the session's records). It imports the record and the gate.
"""
