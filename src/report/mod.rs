//! Seeing the result: progress lines, Markdown/HTML reports, and comparing two runs.
