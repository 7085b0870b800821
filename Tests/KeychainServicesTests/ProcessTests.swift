import Foundation
import KeychainServices
import TestSupport
import Testing

/// Starts `keychain-stress add` on `store` (its files, or its daemon in daemon mode), adding `count` items named
/// `prefix-N`; its standard output is the pipe.
func startStress(_ store: TestStore, prefix: String, count: Int) throws -> (Process, Pipe) {
    let process = Process()
    process.environment = inheritedEnvironment()
    process.executableURL = try builtExecutable("keychain-stress")
    process.arguments = ["add", store.stressTarget, prefix, String(count)]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.standardError
    try process.run()
    return (process, pipe)
}

@Suite("Keychain across processes", .serialized)
struct ProcessTests {
    @Test func twoProcessesAddingAndReadingOneStoreLoseNothing() throws {
        let store = TestStore()
        try store.with(groups: ["stress"]) { _ = genericPasswordCount() }
        let count = 300
        let first = try startStress(store, prefix: "p1", count: count)
        let second = try startStress(store, prefix: "p2", count: count)
        // This process reads while the two others write.
        var reads = 0
        try store.with(groups: ["stress"]) {
            while first.0.isRunning || second.0.isRunning {
                reads += 1
                _ = genericPasswordCount()
            }
        }
        first.0.waitUntilExit()
        second.0.waitUntilExit()
        #expect(first.0.terminationStatus == 0 && second.0.terminationStatus == 0)
        #expect(reads > 0)
        try store.with(groups: ["stress"]) {
            #expect(genericPasswordCount() == 2 * count)
            for prefix in ["p1", "p2"] {
                for index in stride(from: 0, to: count, by: 37) {
                    #expect(
                        password(account: "\(prefix)-\(index)", service: "stress") == .success("\(prefix)-\(index)"))
                }
            }
        }
    }

    @Test func processKilledDuringWritesLeavesEverySuccessfulAdd() throws {
        let store = TestStore()
        var confirmed: [String] = []
        for round in 0..<3 {
            let (process, pipe) = try startStress(store, prefix: "k\(round)", count: 1_000_000)
            var output = Data()
            let wanted = 40 + round * 25
            while output.split(separator: UInt8(ascii: "\n")).count < wanted {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                output.append(chunk)
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            output.append(pipe.fileHandleForReading.readDataToEndOfFile())
            let text = String(decoding: output, as: UTF8.self)
            // Only complete lines: a line is printed after its add returned success.
            let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            let complete = text.hasSuffix("\n") ? lines : lines.dropLast()
            for line in complete where line.hasPrefix("added ") {
                confirmed.append("k\(round)-\(line.dropFirst(6))")
            }
        }
        #expect(confirmed.count >= 40 + 65 + 90)
        try store.with(groups: ["stress"]) {
            let stored = genericPasswordCount()
            #expect(stored >= confirmed.count)
            for account in confirmed {
                #expect(password(account: account, service: "stress") == .success(account))
            }
        }
    }
}
