import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// An executable product of this package (`lactl`, `keychain-stress`), built next to the test bundle.
///
/// - Throws: `CocoaError(.fileNoSuchFile)` when it is not there (build with `swift build --build-tests`).
package func builtExecutable(_ name: String) throws -> URL {
    var directory = Bundle.main.bundleURL
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    let fromExecutable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [fromExecutable, fromExecutable.deletingLastPathComponent()] {
        let path = candidate.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: path.path) { return path }
    }
    throw CocoaError(.fileNoSuchFile)
}

/// Copies a program to `destination` (created, mode 0755) through a descriptor opened close-on-exec.
///
/// `FileManager.copyItem` opens the copy without `O_CLOEXEC`: a child that another test spawns meanwhile inherits the
/// descriptor open for writing and keeps it for its whole life, and running the copy then fails with ETXTBSY ("Text
/// file busy"; seen with a daemon started by a parallel test).
package func copyExecutable(_ source: String, to destination: String) throws {
    let contents = try Data(contentsOf: URL(fileURLWithPath: source))
    let fd = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(fd) }
    var written = 0
    while written < contents.count {
        let n = contents.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        written += n
    }
}

/// `lactl`, built next to the test bundle.
package func lactlExecutable() throws -> URL { try builtExecutable("lactl") }

/// This process's environment without libfprint's reader selection (`FP_VIRTUAL_DEVICE`, `FP_VIRTUAL_DEVICE_STORAGE`,
/// `FP_DRIVERS_WHITELIST`), merged with `extra`: what a child process starts with.
///
/// The suites set those variables for the virtual reader of whichever test drives one at the moment. A child that
/// inherited them and looked for "any reader" (an example calling `canEvaluatePolicy`, a daemon asked for its
/// status) would open that test's virtual device itself: libfprint's listener replaces the socket file, so the
/// test's scans go to the child, which drops them ("Could not process command: SCAN …"), and the test hangs until its
/// time limit. A child that should drive a reader is given one explicitly.
package func inheritedEnvironment(merging extra: [String: String] = [:]) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    for name in ["FP_VIRTUAL_DEVICE", "FP_VIRTUAL_DEVICE_STORAGE", "FP_DRIVERS_WHITELIST"] {
        environment.removeValue(forKey: name)
    }
    return environment.merging(extra) { _, new in new }
}

/// Runs `executable arguments` to its end with `environment` (default: ``inheritedEnvironment(merging:)``), standard
/// output and error captured together, `input` (when given) on its standard input.
///
/// - Returns: the exit status and what it printed.
package func runCapturingOutput(
    _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, input: String? = nil
) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.environment = environment ?? inheritedEnvironment()
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let standardInput = Pipe()
    if input != nil { process.standardInput = standardInput }
    try process.run()
    if let input {
        standardInput.fileHandleForWriting.write(Data(input.utf8))
        try standardInput.fileHandleForWriting.close()
    }
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
}

/// Runs the shell command `command` on a new pseudo-terminal (util-linux `script`) with `environment`; each time
/// the screen shows the next expected text (after the previous one), waits 200 ms (a prompt is written just before
/// its terminal switches to raw mode, which flushes input) and types its answer. Gives up on a step after 20 s.
///
/// - Returns: the exit status and everything the terminal showed.
package func runOnTerminal(
    _ command: String, environment: [String: String], answering steps: [(expected: String, answer: String)]
) throws -> (status: Int32, screen: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
    process.arguments = ["-qec", command, "/dev/null"]
    process.environment = environment
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    let shown = Mutex("")
    // Read on a thread of its own until the end of the output, not through `readabilityHandler`: its dispatch source
    // outlived the descriptor when the pipe closed, and libdispatch's event loop then crashed the test process (a bad
    // pointer in `_dispatch_event_loop_drain`, seen once in a stress series' daemon pass).
    let reading = DispatchSemaphore(value: 0)
    // A descriptor of its own: the pipe's may be closed with it while the thread still reads (a program left
    // holding the terminal keeps the output open).
    let descriptor = dup(output.fileHandleForReading.fileDescriptor)
    let reader = Thread {
        defer { close(descriptor) }
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            shown.withLock { $0 += String(decoding: chunk[0..<count], as: UTF8.self) }
        }
        reading.signal()
    }
    try process.run()
    reader.start()
    var seen = 0
    for (expected, answer) in steps {
        // A hang guard, generous for a loaded machine: the loop ends at the prompt.
        let deadline = Date().addingTimeInterval(60)
        var found = false
        while !found && Date() < deadline && process.isRunning {
            found = shown.withLock { screen in
                let start = screen.index(screen.startIndex, offsetBy: min(seen, screen.count))
                guard let range = screen.range(of: expected, range: start..<screen.endIndex) else { return false }
                seen = screen.distance(from: screen.startIndex, to: range.upperBound)
                return true
            }
            if !found { usleep(20_000) }
        }
        guard found else { break }
        usleep(200_000)
        input.fileHandleForWriting.write(Data(answer.utf8))
    }
    process.waitUntilExit()
    // The output ends with the programs (a background program still holding the terminal keeps it open: bounded).
    _ = reading.wait(timeout: .now() + 30)
    return (process.terminationStatus, shown.withLock { $0 })
}

/// Whether Tests/Fixtures/ExeSwap can be built and run here: it is x86-64 code, built by the C compiler.
package let exeSwapBuildable: Bool = {
    #if arch(x86_64)
        return FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")
    #else
        return false
    #endif
}()

extension Trait where Self == ConditionTrait {
    /// Runs the test only where Tests/Fixtures/ExeSwap builds (x86-64, a C compiler).
    package static var needsTheExeSwapProgram: Self {
        .enabled(if: exeSwapBuildable, "the PR_SET_MM_MAP attack program is x86-64 code built with /usr/bin/cc")
    }
}

/// Builds Tests/Fixtures/ExeSwap (the `PR_SET_MM_MAP` attack of issue 47: a static program that runs on from the
/// vDSO and sets its memory map's executable to another file) into `directory`; the program's path.
package func builtExeSwap(in directory: String) throws -> String {
    let program = directory + "/exe-swap"
    let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/ExeSwap/exe-swap.c").standardized.path
    // The payload runs from a copy: no stack guard, no jump table, no call through the PLT or a CET landing pad.
    let built = try runCapturingOutput(
        URL(fileURLWithPath: "/usr/bin/cc"),
        [
            "-static", "-O2", "-fno-stack-protector", "-fcf-protection=none", "-fno-jump-tables", "-fno-pic",
            "-no-pie", "-o", program, source,
        ])
    guard built.status == 0 else {
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "cc exe-swap.c: \(built.output)"])
    }
    return program
}
