import Foundation

/// A process named so that a reused pid does not pass for it: its pid and its start time (`/proc/<pid>/stat` field
/// 22, clock ticks after boot), as polkit names a `unix-process` subject. A keychain request carries one when an
/// administrative tool (`lactl secret-service`) asks on behalf of another program of its user
/// (``EvaluationOptions/subject``).
package struct ProcessReference: Sendable, Equatable, Hashable {
    package var pid: Int32
    package var startTime: UInt64

    package init(pid: Int32, startTime: UInt64) {
        self.pid = pid
        self.startTime = startTime
    }
}

extension ProcessReference {
    /// Process `pid` as it runs now, named by its start time; nil when no process has that pid.
    package static func running(_ pid: Int32) -> ProcessReference? {
        guard pid > 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        // After the command name (which may hold spaces and parentheses) come field 3 (state) onwards.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 19, let started = UInt64(fields[19]) else { return nil }
        return ProcessReference(pid: pid, startTime: started)
    }
}

extension ProcessReference: ProtocolCodable {
    /// A record: 1 pid, 2 start time.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, pid)
        writer.field(2, startTime)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(pid: try reader.field(1), startTime: try reader.field(2))
    }
}
