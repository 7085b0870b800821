import Foundation

/// Timing helpers shared by every benchmark section.
enum Measure {
    /// Runs `body` repeatedly for about `seconds` (after a short warm-up) and returns operations per second.
    static func opsPerSecond(seconds: Double = 2, _ body: () throws -> Void) rethrows -> Double {
        for _ in 0..<50 { try body() }
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .milliseconds(Int(seconds * 1000))
        var iterations = 0
        while true {
            for _ in 0..<20 { try body() }
            iterations += 20
            if clock.now >= deadline { break }
        }
        let elapsed = start.duration(to: clock.now)
        let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Double(iterations) / elapsedSeconds
    }

    /// Prints one comparison line: ours, the baseline, and ours / baseline.
    static func report(_ name: String, ours: Double, baseline: Double, baselineName: String, target: String? = nil) {
        let ratio = baseline > 0 ? ours / baseline : .nan
        var line = "\(name): ours \(format(ours)) ops/s, \(baselineName) \(format(baseline)) ops/s, ratio \(String(format: "%.2f", ratio))"
        if let target { line += " (target \(target))" }
        print(line)
    }

    static func format(_ value: Double) -> String {
        String(format: value >= 100 ? "%.0f" : "%.2f", value)
    }

    /// Runs a command and returns its standard output, or nil when it cannot run.
    static func run(_ executable: String, _ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
