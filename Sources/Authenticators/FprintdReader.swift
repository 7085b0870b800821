internal import CFprintd
import Foundation
import SecureCrypto
import SecurityProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// The reader as fprintd owns it (`net.reactivated.Fprint` on the system bus): the prints are fprintd's, enrolled by
/// GNOME Settings, KDE, `fprintd-enroll` or us, and kept in its store; the device is claimed for one operation and
/// released on every path, so `pam_fprintd`, the lock screen and `fprintd-verify` keep working beside us.
///
/// Each operation opens a bus connection of its own and closes it: fprintd releases a claim whose client went away,
/// so a crash of ours never leaves the reader claimed. The calls block; ``BiometricAuthenticator`` runs them on a
/// thread of their own. Through GDBus (GLib's D-Bus, already in the process with libfprint: no new library), in C
/// (`CFprintd`), so that no variadic GVariant call crosses into Swift.
final class FprintdReader: Sendable {
    /// The bus: nil for the system bus (`DBUS_SYSTEM_BUS_ADDRESS` honoured), else a D-Bus address.
    let address: String?
    /// Where fprintd keeps prints (`<base>/<user>/<driver>/<device>/<finger>`): its `STATE_DIRECTORY`,
    /// `/var/lib/fprint` by default. Read for the enrolled set's state hash.
    let printDirectory: String

    init(address: String?, printDirectory: String) {
        self.address = address
        self.printDirectory = printDirectory
    }

    /// The default device.
    struct Device: Sendable {
        var path: String
        var name: String
        var enrollStages: Int
    }

    /// Whether fprintd is on the bus at `address` (or can be started there). A machine without a system bus is
    /// answered without GLib: only a bus socket that exists is asked (GIO's first connection loads its modules).
    static func isPresent(address: String?) -> Bool {
        let bus =
            address ?? ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"]
            ?? "unix:path=/run/dbus/system_bus_socket"
        if bus.hasPrefix("unix:path="), access(String(bus.dropFirst("unix:path=".count)), F_OK) != 0 { return false }
        var error: UnsafeMutablePointer<CChar>?
        guard let client = la_fprintd_open(address, &error) else {
            la_fprintd_free(error)
            return false
        }
        defer { la_fprintd_close(client) }
        let present = la_fprintd_present(client, &error)
        la_fprintd_free(error)
        return present == 1
    }

    /// The default device. - Throws: `biometryNotAvailable` when fprintd cannot be reached or has no reader.
    func device() throws -> Device {
        try withClient { client in try Self.device(client) }
    }

    /// The fingers `user` has enrolled (fprintd's names that are not ours are left out).
    func enrolledFingers(user: String) throws -> [Finger] {
        try withClient { client in
            let device = try Self.device(client)
            var fingers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
            var failure = Failure()
            guard la_fprintd_enrolled_fingers(client, device.path, user, &fingers, &failure.name, &failure.message) == 0
            else { throw failure.error(.biometryNotAvailable) }
            defer { la_fprintd_free_strv(fingers) }
            var found: [Finger] = []
            var index = 0
            while let name = fingers?[index] {
                if let finger = Self.finger(named: String(cString: name)) { found.append(finger) }
                index += 1
            }
            return found.sorted { $0.rawValue < $1.rawValue }
        }
    }

    /// Verifies (`enroll` false: any enrolled finger) or enrolls `finger` for `user`, reporting fprintd's statuses
    /// before the final one to `progress`; the final status.
    func run(
        user: String, enroll: Bool, finger: Finger?, timeout: Duration, cancellation: FprintdCancellation,
        progress: @escaping (String) -> Void
    ) throws -> String {
        try withClient { client in
            let device = try Self.device(client)
            var status: UnsafeMutablePointer<CChar>?
            var failure = Failure()
            let milliseconds = Int32(clamping: timeout.components.seconds * 1_000)
            let box = Unmanaged.passRetained(ProgressBox(progress))
            defer { box.release() }
            let result = la_fprintd_run(
                client, device.path, user, enroll ? 1 : 0, finger.map(Self.name(of:)) ?? "any", milliseconds,
                cancellation.flag,
                { context, status in
                    guard let context, let status else { return }
                    Unmanaged<ProgressBox>.fromOpaque(context).takeUnretainedValue().report(String(cString: status))
                }, box.toOpaque(), &status, &failure.name, &failure.message)
            guard result == 0, let status else { throw failure.error(.biometryNotAvailable) }
            defer { la_fprintd_free(status) }
            let final = String(cString: status)
            // fprintd reports a reader unplugged during the operation as an unknown error, then has no device.
            if final.hasSuffix("-unknown-error"), (try? Self.device(client)) == nil {
                return enroll ? "enroll-disconnected" : "verify-disconnected"
            }
            return final
        }
    }

    /// Deletes `user`'s print of `finger` (every print of the user when nil).
    func delete(user: String, finger: Finger?) throws {
        try withClient { client in
            let device = try Self.device(client)
            var failure = Failure()
            guard
                la_fprintd_delete(
                    client, device.path, user, finger.map(Self.name(of:)), &failure.name, &failure.message) == 0
            else { throw failure.error(.biometryNotEnrolled) }
        }
    }

    /// The files fprintd keeps for `user`'s prints (on every device), sorted by path; nil when its store cannot be
    /// read (fprintd's directories are root's, 0700: only localauthd, as root, reads them).
    func printFiles(user: String) -> [(path: String, info: stat)]? {
        let base = printDirectory + "/" + user
        var info = stat()
        guard stat(base, &info) == 0 else {
            // No directory: nothing enrolled, or unreadable above it.
            return errno == ENOENT ? [] : nil
        }
        guard access(base, R_OK | X_OK) == 0, let enumerator = FileManager.default.enumerator(atPath: base) else {
            return nil
        }
        var files: [(path: String, info: stat)] = []
        while let relative = enumerator.nextObject() as? String {
            let path = base + "/" + relative
            var file = stat()
            guard lstat(path, &file) == 0, file.st_mode & S_IFMT == S_IFREG else { continue }
            files.append((relative, file))
        }
        return files.sorted { $0.path < $1.path }
    }

    // MARK: Names

    /// fprintd's name for `finger`: the thumbs as ours, the other fingers with "-finger" after them.
    static func name(of finger: Finger) -> String {
        switch finger {
        case .leftThumb, .rightThumb, .unknown: finger.name
        default: finger.name + "-finger"
        }
    }

    static func finger(named name: String) -> Finger? {
        Finger.allCases.first { $0 != .unknown && Self.name(of: $0) == name }
    }

    // MARK: Plumbing

    private func withClient<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        var error: UnsafeMutablePointer<CChar>?
        guard let client = la_fprintd_open(address, &error) else {
            let message = error.map { String(cString: $0) } ?? "cannot connect to the system bus"
            la_fprintd_free(error)
            throw AuthenticationError(.biometryNotAvailable, "fprintd: \(message)")
        }
        defer { la_fprintd_close(client) }
        return try body(client)
    }

    private static func device(_ client: OpaquePointer) throws -> Device {
        var path: UnsafeMutablePointer<CChar>?
        var name: UnsafeMutablePointer<CChar>?
        var stages: Int32 = 0
        var failure = Failure()
        guard la_fprintd_default_device(client, &path, &name, &stages, &failure.name, &failure.message) == 0,
            let path, let name
        else { throw failure.error(.biometryNotAvailable) }
        defer {
            la_fprintd_free(path)
            la_fprintd_free(name)
        }
        return Device(path: String(cString: path), name: String(cString: name), enrollStages: Int(stages))
    }

    /// A failed call's D-Bus error name and message, freed when read.
    private struct Failure {
        var name: UnsafeMutablePointer<CChar>?
        var message: UnsafeMutablePointer<CChar>?

        /// The error for this failure: fprintd's NoEnrolledPrints is `biometryNotEnrolled`, a missing device or
        /// service `biometryNotAvailable`, a busy device `biometryNotAvailable` saying so; else `fallback`.
        mutating func error(_ fallback: AuthenticationError.Code) -> AuthenticationError {
            let errorName = name.map { String(cString: $0) }
            let text = message.map { String(cString: $0) } ?? "fprintd failed"
            la_fprintd_free(name)
            la_fprintd_free(message)
            (name, message) = (nil, nil)
            let code: AuthenticationError.Code =
                switch errorName {
                case "net.reactivated.Fprint.Error.NoEnrolledPrints": .biometryNotEnrolled
                case "net.reactivated.Fprint.Error.NoSuchDevice", "org.freedesktop.DBus.Error.ServiceUnknown",
                    "net.reactivated.Fprint.Error.AlreadyInUse", "net.reactivated.Fprint.Error.PermissionDenied":
                    .biometryNotAvailable
                default: fallback
                }
            return AuthenticationError(code, "fprintd: \(text)")
        }
    }

    private final class ProgressBox {
        let report: (String) -> Void
        init(_ report: @escaping (String) -> Void) { self.report = report }
    }
}

/// The flag an fprintd operation's wait looks at every 20 ms: set once, from any thread, to stop it.
// Safe to share: one aligned word, written once (0 to 1) and read by the waiting C loop through a volatile
// pointer; nothing else lives behind it.
final class FprintdCancellation: @unchecked Sendable {
    enum Reason: Sendable { case task }

    let flag: UnsafeMutablePointer<Int32>
    private let lock = NSLock()
    private var reason: Reason?

    init() {
        flag = .allocate(capacity: 1)
        flag.initialize(to: 0)
    }

    deinit { flag.deallocate() }

    func cancel() {
        lock.withLock { reason = reason ?? .task }
        flag.pointee = 1
    }

    var isCancelled: Bool { lock.withLock { reason != nil } }
}
