"""dropnb.book: running, judging and rendering the book, apart from its mathematics.

:mod:`~dropnb.book.layout` (the book's places and lists: folders, table of contents, ledger,
profiles), :mod:`~dropnb.book.config` (profile, seeds, device), :mod:`~dropnb.book.threads` (thread
counts of the numeric libraries), :mod:`~dropnb.book.claims` (claims and errata),
:mod:`~dropnb.book.render` (how numbers and claims read), :mod:`~dropnb.book.notebooks` (executing
pages), :mod:`~dropnb.book.regression` (golden claim records), :mod:`~dropnb.book.nbval` (the pages
through nbval), :mod:`~dropnb.book.planted` (planted bugs as forks of one page run), :mod:`~dropnb.book.timing` (what a page run cost, as one row),
:mod:`~dropnb.book.gpukit` (the wheels a bare GPU machine lacks), :mod:`~dropnb.book.sphinxext`
(the pages generated from the records), :mod:`~dropnb.book.bibliography` (the bibliography's
style), :mod:`~dropnb.book.browser` (the built book in a real browser: layout checks, the PDF),
:mod:`~dropnb.book.plotting` (figure style).

These modules import no mathematical module of :mod:`dropnb` but :mod:`~dropnb.checks`.
"""
