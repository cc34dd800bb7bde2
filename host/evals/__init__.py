"""The evaluation set (`questions.xml`), its script for the script provider (`script.json`) and the runner behind
`computer-use eval` (`host.evals.runner`). See docs/eval.md."""
