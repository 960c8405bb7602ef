"""Reports: what a run and its verdicts look like to a reader. The terminal summary and the live
progress line (``terminal``, ``progress``, tables laid out by ``layout`` and ``rows``), the HTML
page with its plots (``html_report``, ``plots``), the markdown summary and CI job summary
(``markdown_report``), CSV, OpenMetrics and JUnit properties (``csv_report``, ``openmetrics``,
``junit``), the comparison table, scaling across world sizes (``scaling``), and the commands that
build reports from saved files (``commands``: ``tesserabench compare`` and ``report``). Every report
reads the record (``RunDocument``, ``BenchRecord``, ``Verdict``) and what ``data.ReportData``
gathers; none measures or judges. It may import the record, the machine, static analysis, the
gate, history, processes, A/B and the frozen ``Settings``: it is the top of the packages, below
only the pytest glue and the command.
"""
