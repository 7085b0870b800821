// la-bench: every benchmark prints ops/s beside a baseline measured in the same run, and the ratio.
// Sections live in their own files; each is an enum with `static func run() async throws`.
print("la-bench: ratios against baselines measured in this run (higher is better unless said)")
try await CryptoBenchmarks.run()
