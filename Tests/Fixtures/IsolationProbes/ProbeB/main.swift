import IsolationProbe

// Isolation probe B: a second program, its own executable, for the isolation tests; it tries to reach A's items.
await IsolationProbe.main(Array(CommandLine.arguments.dropFirst()))
