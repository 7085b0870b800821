import AppRegistry
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue "Caller identity", item 4: an item's list of trusted applications (`kSecAttrAccess`). Programs of the
/// item's access group that the list does not name are asked through their own presenter, and an allow counts only
/// with the user's passcode, which the daemon checks through PAM: a program answering its own question gets
/// nothing. A listed program whose executable was replaced is asked whether it changed. Real daemon, three programs.
@Suite("localauthd: trusted applications", .serialized, .timeLimit(.minutes(4)))
struct TrustedApplicationTests {
    typealias Probe = AppIsolationTests.Probe

    static let interactionNotAllowed = "-25308"
    static let authFailed = "-25293"
    static let group = "TEAMT.shared"

    /// Probes A and B and a third program C (B's build with `build` appended, so code of its own, at a path of its
    /// own), registered as three apps of one team sharing ``group``.
    static func apps(_ world: DaemonWorld) throws -> (a: Probe, b: Probe, c: Probe) {
        let (a, b) = try AppIsolationTests.probes(world)
        let c = Probe(executable: world.directory + "/probe-c", socket: world.daemon.socket)
        try install(b.executable, at: c.executable, build: "c-1")
        for (name, probe) in [("a", a), ("b", b), ("c", c)] {
            try DaemonProcess.register(
                AppRegistration(
                    applicationIdentifier: "TEAMT.probe-\(name)", executable: probe.executable,
                    keychainAccessGroups: [group]),
                as: "probe-\(name).conf", in: world.daemon.registryDirectory)
        }
        return (a, b, c)
    }

    /// Writes the program at `source` with `build` appended (ELF ignores trailing bytes) to a new file at `path`,
    /// mode 0755: other code, as a rebuild gives.
    static func install(_ source: String, at path: String, build: String) throws {
        try? FileManager.default.removeItem(atPath: path)
        let code = try Data(contentsOf: URL(fileURLWithPath: source)) + Data("\n\(build)\n".utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: code, attributes: [.posixPermissions: 0o755]))
    }

    static func answering(_ choice: String, passcode: String? = nil) -> [String: String] {
        var environment = ["PROBE_CHOICE": choice]
        environment["PROBE_PASSCODE"] = passcode
        return environment
    }

    /// A lists only itself. B, of the same group, is asked; its own Deny, and its own Allow without the user's
    /// passcode, get nothing; Allow once with the passcode reads once; updating and deleting are asked too.
    @Test func aProgramTheListDoesNotNameIsAskedAndOnlyTheUsersPasscodeLetsItIn() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b, _) = try Self.apps(world)
        #expect(try a.run(["add-trusted", "svc", "acct", "a-secret", Self.group])["status"] == "0")
        #expect(try a.run(["read", "svc", "acct", Self.group])["value"] == "a-secret", "A is on its own list")
        let listed = try a.run(["trusted", "svc", "acct", Self.group])
        #expect(listed["trusted"] == "TEAMT.probe-a \(a.executable)", "\(listed)")

        // The attributes are not guarded; the data is.
        #expect(try b.run(["list", Self.group])["accounts"] == "acct")
        #expect(try b.run(["read", "svc", "acct", Self.group])["status"] == Self.interactionNotAllowed)
        let denied = try b.run(["read", "svc", "acct", Self.group], environment: Self.answering("deny"))
        #expect(denied["status"] == Self.authFailed, "\(denied)")
        #expect(denied["asked"] == "TEAMT.probe-b wants to use the item svc.", "\(denied)")
        #expect(denied["changed"] == "false")
        #expect(denied["value"] == "")

        // B answering Allow itself: the daemon still wants the user's passcode, which B does not know.
        for choice in ["once", "always"] {
            let guessed = try b.run(
                ["read", "svc", "acct", Self.group], environment: Self.answering(choice, passcode: "guess"))
            #expect(guessed["status"] == Self.authFailed, "\(guessed)")
            #expect(guessed["value"] == "")
        }
        let once = try b.run(
            ["read", "svc", "acct", Self.group], environment: Self.answering("once", passcode: "secret"))
        #expect(once["value"] == "a-secret", "\(once)")
        #expect(try b.run(["read", "svc", "acct", Self.group])["status"] == Self.interactionNotAllowed, "once is once")

        // Changing or deleting the item is asked as well, and a denial changes nothing.
        let update = try b.run(
            ["update", "svc", "acct", "b-was-here", Self.group], environment: Self.answering("deny"))
        #expect(update["status"] == Self.authFailed, "\(update)")
        let delete = try b.run(["delete", "svc", "acct", Self.group], environment: Self.answering("deny"))
        #expect(delete["status"] == Self.authFailed, "\(delete)")
        #expect(try a.run(["read", "svc", "acct", Self.group])["value"] == "a-secret")
        #expect(try a.run(["trusted", "svc", "acct", Self.group])["trusted"] == "TEAMT.probe-a \(a.executable)")
    }

    /// C is trusted by the list A made; its executable is then replaced (the app rebuilt, or someone else's code at
    /// its path). C is asked again, as a program that changed, and Always allow with the passcode trusts the new
    /// code in place of the old. B, allowed always, joins the list and is not asked again.
    @Test func aProgramReplacedAfterItWasTrustedIsAskedWhetherItChanged() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b, c) = try Self.apps(world)
        #expect(try a.run(["add-trusted", "svc", "acct", "a-secret", Self.group, c.executable])["status"] == "0")
        #expect(try c.run(["read", "svc", "acct", Self.group])["value"] == "a-secret", "C is on the list")

        // C's executable replaced by other code (a rebuild, or someone else's program at its path).
        try Self.install(b.executable, at: c.executable, build: "c-2")
        #expect(try c.run(["whoami"])["application"] == "TEAMT.probe-c", "registered by path, still C")
        #expect(try c.run(["read", "svc", "acct", Self.group])["status"] == Self.interactionNotAllowed)
        let asked = try c.run(["read", "svc", "acct", Self.group], environment: Self.answering("deny"))
        #expect(asked["status"] == Self.authFailed, "\(asked)")
        #expect(asked["changed"] == "true", "\(asked)")
        #expect(
            asked["asked"]?.hasPrefix("TEAMT.probe-c has changed since it was allowed to use the item svc.") == true)

        let allowed = try c.run(
            ["read", "svc", "acct", Self.group], environment: Self.answering("always", passcode: "secret"))
        #expect(allowed["value"] == "a-secret", "\(allowed)")
        #expect(try c.run(["read", "svc", "acct", Self.group])["value"] == "a-secret", "the new code is trusted now")

        let joined = try b.run(
            ["read", "svc", "acct", Self.group], environment: Self.answering("always", passcode: "secret"))
        #expect(joined["value"] == "a-secret", "\(joined)")
        #expect(try b.run(["read", "svc", "acct", Self.group])["value"] == "a-secret")

        // The list: A, C once (its new code), B.
        let listed = try a.run(["trusted", "svc", "acct", Self.group])["output"] ?? ""
        let entries = listed.split(separator: "\n").filter { $0.hasPrefix("trusted=") }
        #expect(entries.count == 3, "\(listed)")
        #expect(entries.filter { $0.contains("TEAMT.probe-c") }.count == 1, "\(listed)")
        #expect(entries.contains { $0.contains("TEAMT.probe-b") }, "\(listed)")
    }

    /// `lactl keychain trust` edits a list: B trusted by path reads without a question; `untrust` asks it again.
    /// The group is an app's, not lactl's: without a terminal lactl cannot act in it at all, and with one the user
    /// allows it with the passcode first. lactl, not on the list, must then itself be allowed to change it: denied,
    /// the list stays as it was.
    @Test func lactlTrustAndUntrustEditTheList() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b, _) = try Self.apps(world)
        var environment = inheritedEnvironment()
        environment["LA_DAEMON_SOCKET"] = world.daemon.socket
        environment["LA_PRESENTER"] = "none"
        let trust = "\(try lactlExecutable().path) keychain trust -s svc -a open -G \(Self.group) \(b.executable)"
        // An item with no list yet: lactl gives it one naming B, once the user allowed it into the app's group.
        #expect(try a.run(["add", "svc", "open", "o-secret", Self.group])["status"] == "0")
        let refused = try runCapturingOutput(
            try lactlExecutable(), ["keychain", "trust", "-s", "svc", "-a", "open", "-G", Self.group, b.executable],
            environment: environment)
        #expect(refused.status != 0, "\(refused.output)")
        #expect(refused.output.contains("User interaction is not allowed"), "\(refused.output)")
        #expect(try a.run(["read", "svc", "open", Self.group])["value"] == "o-secret", "no list yet")

        environment["LA_PRESENTER"] = nil
        let trusted = try runOnTerminal(trust, environment: environment, answering: [("Password:", "secret\r")])
        #expect(trusted.status == 0, "\(trusted.screen)")
        #expect(trusted.screen.contains("trusted: TEAMT.probe-b \(b.executable)"), "\(trusted.screen)")
        #expect(try b.run(["read", "svc", "open", Self.group])["value"] == "o-secret")
        #expect(
            try a.run(["read", "svc", "open", Self.group])["status"] == Self.interactionNotAllowed, "A is not on it")

        // Now lactl is not on the list either: after the passcode it is asked, and a denial changes nothing.
        let untrusted = try runOnTerminal(
            trust.replacingOccurrences(of: " trust ", with: " untrust "), environment: environment,
            answering: [("Password:", "secret\r"), ("[a]lways allow: ", "d\r")])
        #expect(untrusted.status != 0, "\(untrusted.screen)")
        #expect(untrusted.screen.contains("wants to use the item"), "\(untrusted.screen)")
        #expect(try b.run(["read", "svc", "open", Self.group])["value"] == "o-secret", "unchanged")
    }
}
