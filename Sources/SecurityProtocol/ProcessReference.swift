import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A process named so that a reused pid does not pass for it: its pid and its start time (`/proc/<pid>/stat` field
/// 22, clock ticks after boot), as polkit names a `unix-process` subject. A keychain request carries one when an
/// administrative tool (`lactl secret-service`) asks on behalf of another program of its user
/// (``EvaluationOptions/subject``).
package struct ProcessReference: Sendable, Equatable, Hashable {
    package var pid: Int32
    package var startTime: UInt64
    /// The file the process ran when it was named (a pid and start time outlive an `exec`): the process must still
    /// run it when it is identified. Nil only where the file does not matter (a login session's process).
    package var executable: ExecutableFile?

    /// A file by device and inode, as `stat` reports them (`/proc/<pid>/exe` followed).
    package struct ExecutableFile: Sendable, Equatable, Hashable {
        package var device: UInt64
        package var inode: UInt64

        package init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }

        /// The file process `pid` runs now; nil when it is gone or cannot be read.
        package init?(runBy pid: Int32) {
            var status = stat()
            guard pid > 0, stat("/proc/\(pid)/exe", &status) == 0 else { return nil }
            self.init(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        }
    }

    package init(pid: Int32, startTime: UInt64, executable: ExecutableFile? = nil) {
        self.pid = pid
        self.startTime = startTime
        self.executable = executable
    }
}

extension ProcessReference {
    /// Process `pid` as it runs now, named by its start time; nil when no process has that pid.
    package static func running(_ pid: Int32) -> ProcessReference? {
        guard let fields = statFields(pid), fields.count > 19, let started = UInt64(fields[19]) else { return nil }
        return ProcessReference(pid: pid, startTime: started)
    }

    /// `/proc/<pid>/stat` after the command name (which may hold spaces and parentheses): field 3 (state) first;
    /// nil when the process is gone.
    package static func statFields(_ pid: Int32) -> [Substring]? {
        guard pid > 0, let stat = readSmallFile("/proc/\(pid)/stat"), let end = stat.lastIndex(of: ")") else {
            return nil
        }
        return stat[stat.index(after: end)...].split(separator: " ")
    }

    /// A file of `/proc` of at most 4 KiB, in one read (Foundation's reading cost more than the rest of a
    /// caller's check: every D-Bus call a provider makes on a program's behalf reads it).
    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { buffer in
            let count = read(fd, buffer.baseAddress, buffer.count)
            guard count > 0 else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<count]), as: UTF8.self)
        }
    }

    /// Process `pid` as it runs now, with the file it runs; nil when it is gone or its file cannot be read.
    package static func runningWithExecutable(_ pid: Int32) -> ProcessReference? {
        guard let started = running(pid), let file = ExecutableFile(runBy: pid) else { return nil }
        // Read again: the same start time around the file's read means the file is that process's.
        guard running(pid) == started else { return nil }
        return ProcessReference(pid: pid, startTime: started.startTime, executable: file)
    }
}

extension ProcessReference: ProtocolCodable {
    /// A record: 1 pid, 2 start time, 3 executable (left out when nil).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, pid)
        writer.field(2, startTime)
        writer.optionalField(3, executable)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(pid: try reader.field(1), startTime: try reader.field(2), executable: try reader.optionalField(3))
    }
}

extension ProcessReference.ExecutableFile: ProtocolCodable {
    /// A record: 1 device, 2 inode.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, device)
        writer.field(2, inode)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(device: try reader.field(1), inode: try reader.field(2))
    }
}
