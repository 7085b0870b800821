import Foundation

/// Who the engine takes a caller for (`lactl whoami`): in daemon mode what the kernel and the app registry say about
/// the connected process; in embedded mode the calling process and the groups its configuration names, which nobody
/// checks.
package struct CallerInfo: Sendable, Hashable {
    /// `daemon` or `embedded`.
    package var mode: String
    package var uid: UInt32
    package var userName: String
    package var pid: Int32
    /// The executable's canonical path.
    package var executable: String
    /// The executable's SHA-256, when it was read.
    package var executableDigest: Data?
    /// The registered `application-identifier`; nil for a program with no registration.
    package var applicationIdentifier: String?
    /// The registry file that named the program.
    package var registrationFile: String?
    /// The groups the caller holds on this connection, the default first.
    package var accessGroups: [String]
    /// Whether the caller may act in every group of its user (an administrative tool).
    package var mayAccessAllGroups: Bool
    /// Where the engine keeps this user's keys ("software — keys are files", or the TPM, its maker and firmware);
    /// filled in by the engine that answers.
    package var enclave: String?

    package init(
        mode: String, uid: UInt32, userName: String, pid: Int32, executable: String, executableDigest: Data?,
        applicationIdentifier: String?, registrationFile: String?, accessGroups: [String], mayAccessAllGroups: Bool,
        enclave: String? = nil
    ) {
        self.mode = mode
        self.uid = uid
        self.userName = userName
        self.pid = pid
        self.executable = executable
        self.executableDigest = executableDigest
        self.applicationIdentifier = applicationIdentifier
        self.registrationFile = registrationFile
        self.accessGroups = accessGroups
        self.mayAccessAllGroups = mayAccessAllGroups
        self.enclave = enclave
    }
}

extension CallerInfo: ProtocolCodable {
    /// A record: 1 mode, 2 uid, 3 userName, 4 pid, 5 executable, 6 executableDigest (when known),
    /// 7 applicationIdentifier (when registered), 8 registrationFile (when registered), 9 accessGroups,
    /// 10 mayAccessAllGroups, 11 enclave (when told).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, mode)
        writer.field(2, Int32(bitPattern: uid))
        writer.field(3, userName)
        writer.field(4, pid)
        writer.field(5, executable)
        writer.optionalField(6, executableDigest)
        writer.optionalField(7, applicationIdentifier)
        writer.optionalField(8, registrationFile)
        writer.field(9, accessGroups)
        writer.field(10, mayAccessAllGroups)
        writer.optionalField(11, enclave)
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self.init(
            mode: try reader.field(1), uid: UInt32(bitPattern: try reader.field(2) as Int32),
            userName: try reader.field(3), pid: try reader.field(4),
            executable: try reader.field(5), executableDigest: try reader.optionalField(6),
            applicationIdentifier: try reader.optionalField(7), registrationFile: try reader.optionalField(8),
            accessGroups: try reader.field(9), mayAccessAllGroups: try reader.field(10),
            enclave: try reader.optionalField(11))
    }
}
