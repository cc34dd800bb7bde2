// Allure 3 report config, used by `python -m lab.report` (backends/node_modules/.bin/allure generate --config ...).
// A plain object rather than `defineConfig` from "allure": the CLI lives in backends/node_modules, so a bare
// `import "allure"` would not resolve from the repo root.
// Only the Awesome plugin, in single-file mode: reports/allure-report/index.html is one self-contained file
// (scripts, styles and attachments inlined as base64) that opens offline from file://.
// Relative paths resolve against the working directory (the repo root), not this file.
export default {
  name: "computer-use-lab",
  resultsDir: "./reports/allure-results",
  output: "./reports/allure-report",
  plugins: {
    awesome: {
      options: {
        singleFile: true,
        reportLanguage: "en",
        // Browse by release proof, then backend, then requirement (labels set in suites/conftest.py).
        groupBy: ["epic", "feature", "story"],
      },
    },
  },
};
