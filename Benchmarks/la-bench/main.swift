// la-bench: every benchmark prints ops/s beside a baseline measured in the same run, and the ratio.
// Sections live in their own files; each is an enum with `static func run() async throws`.
// `la-bench crypto keychain authenticators` runs only the named sections.
import Foundation

let sections: [(name: String, run: () async throws -> Void)] = [
    ("crypto", CryptoBenchmarks.run),
    ("keychain", KeychainBenchmarks.run),
    ("constants", ConstantBenchmarks.run),
    ("authenticators", AuthenticatorBenchmarks.run),
    ("seckey", SecKeyBenchmarks.run),
    ("tpm", TPMBenchmarks.run),
    ("unlock", UnlockBenchmarks.run),
    ("context", ContextBenchmarks.run),
    ("agent", AgentBenchmarks.run),
    ("secret-service", SecretServiceBenchmarks.run),
    ("pam-finger", PAMFingerBenchmarks.run),
    ("fido", FIDOBenchmarks.run),
    ("daemon", DaemonBenchmarks.run),
    ("pressure", PressureBenchmarks.run),
    ("passcode-pressure", PasscodePressureBenchmarks.run),
    ("load", LoadBenchmarks.run),
    // Ten minutes: only when named (`make soak`).
    ("soak", LoadBenchmarks.soak),
    ("callgrind", CallgrindBenchmarks.run),
]
// The child the callgrind section runs under valgrind.
if CommandLine.arguments.dropFirst().first == "lookup-loop" {
    try CallgrindBenchmarks.loop(Array(CommandLine.arguments.dropFirst(2)))
    exit(0)
}
// A client process of the load section.
if CommandLine.arguments.dropFirst().first == "load-client" {
    LoadBenchmarks.client(Array(CommandLine.arguments.dropFirst(2)))
}
// The flood the pressure section runs as another user.
if CommandLine.arguments.dropFirst().first == "flood", CommandLine.arguments.count > 2 {
    PressureBenchmarks.flood(socket: CommandLine.arguments[2])
}
// The other user's evaluation the passcode-pressure section runs, which never answers its question.
if CommandLine.arguments.dropFirst().first == "idle-prompt", CommandLine.arguments.count > 2 {
    await PasscodePressureBenchmarks.idle(socket: CommandLine.arguments[2])
}
let chosen = Set(CommandLine.arguments.dropFirst())
print("la-bench: ratios against baselines measured in this run (higher is better unless said)")
for section in sections where chosen.isEmpty ? section.name != "soak" : chosen.contains(section.name) {
    try await section.run()
}
