import IsolationProbe

// Isolation probe A: one of two programs built for the isolation tests (Tests/DaemonTests/AppIsolationTests.swift).
await IsolationProbe.main(Array(CommandLine.arguments.dropFirst()))
