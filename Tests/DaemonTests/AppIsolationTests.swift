import AppRegistry
import Foundation
import SecureCrypto
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue "Caller identity", items 2 and 3: localauthd decides from the connecting program's executable and the app
/// registry which access groups it holds, never from what the program claims. Two programs built for the purpose,
/// `isolation-probe-a` and `isolation-probe-b` (distinct executables), run as real processes against a real daemon.
@Suite("localauthd: one app's items are not another's", .serialized, .timeLimit(.minutes(4)))
struct AppIsolationTests {
    /// One probe program, run against `socket`.
    struct Probe {
        let executable: String
        let socket: String

        /// Runs one command, the program claiming `claimed` (`LA_ACCESS_GROUPS`), with `extra` in its environment;
        /// its `key=value` lines.
        func run(
            _ arguments: [String], claiming claimed: String? = nil, environment extra: [String: String] = [:]
        ) throws -> [String: String] {
            var environment = inheritedEnvironment(merging: extra)
            environment["LA_DAEMON_SOCKET"] = socket
            environment["LA_PRESENTER"] = "none"
            environment["LA_ACCESS_GROUPS"] = claimed
            // A probe copied into place just before may still be open for writing in a child that another test's
            // spawn forked in between (exec then fails with ETXTBSY until that child has exec'd): try again briefly.
            for _ in 0..<50 {
                do {
                    return AppIsolationTests.values(
                        try runCapturingOutput(URL(fileURLWithPath: executable), arguments, environment: environment))
                } catch let error as NSError
                    where (error.userInfo[NSUnderlyingErrorKey] as? NSError)?.code == Int(ETXTBSY)
                {
                    usleep(20_000)
                }
            }
            return AppIsolationTests.values(
                try runCapturingOutput(URL(fileURLWithPath: executable), arguments, environment: environment))
        }
    }

    /// A probe run's `key=value` lines, with its exit status as `exit` and everything it printed as `output`.
    static func values(_ run: (status: Int32, output: String)) -> [String: String] {
        var values: [String: String] = ["exit": String(run.status), "output": run.output]
        for line in run.output.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    static let notFound: Int32 = -25300  // errSecItemNotFound
    static let missingEntitlement: Int32 = -34018  // errSecMissingEntitlement

    static func digest(_ path: String) throws -> String {
        var hash = SHA256()
        hash.update(try Data(contentsOf: URL(fileURLWithPath: path)))
        return AppRegistration.hex(hash.finalize())
    }

    static func probes(_ world: DaemonWorld) throws -> (a: Probe, b: Probe) {
        (
            Probe(executable: try builtExecutable("isolation-probe-a").path, socket: world.daemon.socket),
            Probe(executable: try builtExecutable("isolation-probe-b").path, socket: world.daemon.socket)
        )
    }

    /// A program with no registration holds one group, named after its executable's SHA-256, whatever it claims.
    @Test func anUnregisteredProgramHoldsOnlyAPrivateGroupNamedAfterItsExecutable() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b) = try Self.probes(world)
        let whoA = try a.run(["whoami"], claiming: "TEAM.someone-else, other")
        #expect(whoA["groups"] == "unregistered." + (try Self.digest(a.executable)), "\(whoA)")
        #expect(whoA["application"] == "")
        #expect(whoA["executable"] == (a.executable as NSString).resolvingSymlinksInPath)
        let whoB = try b.run(["whoami"])
        #expect(whoB["groups"] == "unregistered." + (try Self.digest(b.executable)))
        #expect(whoA["groups"] != whoB["groups"])
        #expect(world.daemon.logText.contains("claims ignored"), "the ignored claim is logged")

        // lactl, registered as an administrative tool, says so.
        var environment = inheritedEnvironment()
        environment["LA_DAEMON_SOCKET"] = world.daemon.socket
        let (status, output) = try runCapturingOutput(try lactlExecutable(), ["whoami"], environment: environment)
        #expect(status == 0, "\(output)")
        #expect(output.contains("application: localtest.lactl (registered in lactl.conf)"), "\(output)")
    }

    /// B cannot read, update, delete, list or use what A stored: not by query, not by naming A's group, not by A's
    /// persistent reference, and its attempts change nothing of A's.
    @Test func anotherProgramCannotReachAnAppsItemsKeysOrReferences() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b) = try Self.probes(world)
        let groupA = try a.run(["whoami"])["group"] ?? ""
        #expect(try a.run(["add", "svc", "acct", "a-secret"])["status"] == "0")
        #expect(try a.run(["read", "svc", "acct"])["value"] == "a-secret")
        let reference = try a.run(["ref", "svc", "acct"])["ref"] ?? ""
        #expect(!reference.isEmpty)
        #expect(try a.run(["make-key", "tag-a"])["status"] == "0")
        #expect(try a.run(["sign", "tag-a"])["status"] == "0")

        func statusOfB(_ arguments: String...) throws -> Int32? {
            try b.run(arguments, claiming: groupA)["status"].flatMap { Int32($0) }
        }
        #expect(try statusOfB("read", "svc", "acct") == Self.notFound)
        #expect(try statusOfB("read", "svc", "acct", groupA) == Self.missingEntitlement)
        #expect(try statusOfB("update", "svc", "acct", "b-was-here") == Self.notFound)
        #expect(try statusOfB("update", "svc", "acct", "b-was-here", groupA) == Self.missingEntitlement)
        #expect(try statusOfB("delete", "svc", "acct") == Self.notFound)
        #expect(try statusOfB("delete", "svc", "acct", groupA) == Self.missingEntitlement)
        #expect(try statusOfB("add", "svc", "acct", "b-planted", groupA) == Self.missingEntitlement)
        #expect(try statusOfB("list", groupA) == Self.missingEntitlement)
        let listed = try b.run(["list"], claiming: groupA)
        #expect(!(listed["accounts"] ?? "").contains("acct"), "\(listed)")
        #expect(try statusOfB("read-ref", reference) == Self.notFound)
        #expect(try statusOfB("sign", "tag-a") == Self.notFound)
        #expect(try statusOfB("sign", "tag-a", groupA) == Self.missingEntitlement)

        // A's item and key are as they were.
        #expect(try a.run(["read", "svc", "acct"])["value"] == "a-secret")
        #expect(try a.run(["read-ref", reference])["value"] == "a-secret")
        #expect(try a.run(["sign", "tag-a"])["status"] == "0")
    }

    /// Two apps of one team registered with a shared group both use it, while each one's own group stays its own.
    /// Registrations written while the daemon runs count from the next connection; a removed one stops counting;
    /// a file with a group outside its team is refused with its file and line in the log.
    @Test func aRegisteredSharedGroupWorksForBothAppsAndRegistrationChangesCountAtOnce() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b) = try Self.probes(world)
        let registry = world.daemon.registryDirectory
        try DaemonProcess.register(
            AppRegistration(
                applicationIdentifier: "TEAMX.probe-a", executable: a.executable,
                keychainAccessGroups: ["TEAMX.shared"]),
            as: "probe-a.conf", in: registry)
        try DaemonProcess.register(
            AppRegistration(
                applicationIdentifier: "TEAMX.probe-b", executable: b.executable,
                keychainAccessGroups: ["TEAMX.shared"]),
            as: "probe-b.conf", in: registry)
        let whoA = try a.run(["whoami"])
        #expect(whoA["application"] == "TEAMX.probe-a")
        #expect(whoA["groups"] == "TEAMX.shared,TEAMX.probe-a")

        #expect(try a.run(["add", "svc", "shared", "s-secret"])["status"] == "0")
        #expect(try a.run(["add", "svc", "own", "o-secret", "TEAMX.probe-a"])["status"] == "0")
        #expect(try b.run(["read", "svc", "shared"])["value"] == "s-secret")
        #expect(try b.run(["read", "svc", "shared", "TEAMX.shared"])["value"] == "s-secret")
        #expect(try b.run(["update", "svc", "shared", "s-by-b"])["status"] == "0")
        #expect(try a.run(["read", "svc", "shared"])["value"] == "s-by-b")
        #expect(try b.run(["read", "svc", "own"])["status"] == String(Self.notFound))
        #expect(
            try b.run(["read", "svc", "own", "TEAMX.probe-a"])["status"]
                == String(Self.missingEntitlement))

        // A file granting a group of another team is refused, naming its file and line; B is then unregistered.
        try Data(
            "application-identifier = TEAMX.probe-b\nexecutable = \(b.executable)\nkeychain-access-groups = TEAMY.theirs\n"
                .utf8
        )
        .write(to: URL(fileURLWithPath: registry + "/probe-b.conf"))
        let whoB = try b.run(["whoami"])
        #expect(whoB["application"] == "", "\(whoB)")
        #expect(
            world.daemon.logText.contains(
                "probe-b.conf:3: the access group \"TEAMY.theirs\" does not start with the team prefix TEAMX."))
        #expect(try b.run(["read", "svc", "shared"])["status"] == String(Self.notFound))

        // Removed: A is unregistered from its next connection on; SIGHUP reads the registry again too.
        try FileManager.default.removeItem(atPath: registry + "/probe-a.conf")
        #expect(try a.run(["read", "svc", "shared"])["status"] == String(Self.notFound))
        world.daemon.signal(SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while !world.daemon.logText.contains("SIGHUP: reading the app registry again"), Date() < deadline {
            usleep(20_000)
        }
        #expect(world.daemon.logText.contains("SIGHUP: reading the app registry again"))
        #expect(world.daemon.isRunning)
    }

    /// A registration pinned to a build (`lactl apps register --pin`) names that build only: the same path holding
    /// another executable is not the app.
    /// An iOS app group used as `kSecAttrAccessGroup` (`group.com.example.shared`): granted to the apps whose
    /// registration declares it (`application-groups`, as Apple's application-groups entitlement), refused to an
    /// app that does not (`errSecMissingEntitlement`), and one team's: another team's file claiming it is left out,
    /// naming both.
    @Test func anAppGroupIsGrantedToTheAppsThatDeclareItAndIsOneTeams() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b) = try Self.probes(world)
        let registry = world.daemon.registryDirectory
        let group = "group.com.example.shared"
        try DaemonProcess.register(
            AppRegistration(
                applicationIdentifier: "TEAMG.probe-a", executable: a.executable, applicationGroups: [group]),
            as: "probe-a.conf", in: registry)
        try DaemonProcess.register(
            AppRegistration(applicationIdentifier: "TEAMG.probe-b", executable: b.executable),
            as: "probe-b.conf", in: registry)
        #expect(try a.run(["whoami"])["groups"] == "TEAMG.probe-a,\(group)")
        #expect(try a.run(["add", "svc", "grouped", "g-secret", group])["status"] == "0")
        #expect(try a.run(["read", "svc", "grouped", group])["value"] == "g-secret")
        // B, of the same team, without the declaration.
        #expect(try b.run(["read", "svc", "grouped", group])["status"] == String(Self.missingEntitlement))
        try DaemonProcess.register(
            AppRegistration(
                applicationIdentifier: "TEAMG.probe-b", executable: b.executable, applicationGroups: [group]),
            as: "probe-b.conf", in: registry)
        #expect(try b.run(["read", "svc", "grouped", group])["value"] == "g-secret")
        // Another team's app claiming the group: its file is left out, and it is unregistered.
        try DaemonProcess.register(
            AppRegistration(
                applicationIdentifier: "OTHERTEAM.probe-b", executable: b.executable, applicationGroups: [group]),
            as: "probe-b.conf", in: registry)
        let whoB = try b.run(["whoami"])
        #expect(whoB["application"] == "", "\(whoB)")
        #expect(
            world.daemon.logText.contains(
                "the app group \(group) belongs to team TEAMG (probe-a.conf), not to OTHERTEAM"))
        #expect(try b.run(["read", "svc", "grouped", group])["status"] == String(Self.missingEntitlement))
        // A name that is no app group is refused where it is written.
        #expect(throws: RegistrationError.self) {
            try AppRegistration(
                parsing: "application-identifier = TEAMG.x\nexecutable = /bin/x\napplication-groups = com.example\n",
                file: "x.conf")
        }
    }

    @Test func aPinnedRegistrationNamesOneBuildNotWhateverLiesAtItsPath() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let (a, b) = try Self.probes(world)
        let installed = world.directory + "/probe"
        try copyExecutable(a.executable, to: installed)
        var environment = inheritedEnvironment()
        environment["LA_DAEMON_SOCKET"] = world.daemon.socket
        let configuration = (world.daemon.registryDirectory as NSString).deletingLastPathComponent
        let registered = try runCapturingOutput(
            try lactlExecutable(),
            [
                "apps", "register", installed, "--application-identifier", "TEAMP.pinned", "--group", "TEAMP.vault",
                "--pin", "--config-directory", configuration,
            ],
            environment: environment)
        #expect(registered.status == 0, "\(registered.output)")
        let listed = try runCapturingOutput(
            try lactlExecutable(), ["apps", "list", "--config-directory", configuration], environment: environment)
        #expect(listed.output.contains("TEAMP.pinned"), "\(listed.output)")
        #expect(listed.output.contains("sha256: " + (try Self.digest(a.executable))), "\(listed.output)")

        let pinned = Probe(executable: installed, socket: world.daemon.socket)
        #expect(try pinned.run(["whoami"])["application"] == "TEAMP.pinned")
        #expect(try pinned.run(["add", "svc", "vault", "v-secret"])["status"] == "0")

        // Another program put at the registered path is not the app, and gets nothing of the app's.
        try FileManager.default.removeItem(atPath: installed)
        try copyExecutable(b.executable, to: installed)
        let replaced = Probe(executable: installed, socket: world.daemon.socket)
        #expect(try replaced.run(["whoami"])["application"] == "")
        #expect(try replaced.run(["read", "svc", "vault"])["status"] == String(Self.notFound))
        #expect(
            try replaced.run(["read", "svc", "vault", "TEAMP.vault"])["status"]
                == String(Self.missingEntitlement))

        let removed = try runCapturingOutput(
            try lactlExecutable(), ["apps", "remove", "TEAMP.pinned", "--config-directory", configuration],
            environment: environment)
        #expect(removed.status == 0, "\(removed.output)")
        #expect(!FileManager.default.fileExists(atPath: world.daemon.registryDirectory + "/TEAMP.pinned.conf"))
    }

    /// Two throwaway users running the same program (so the same group name): nothing of one is visible to the
    /// other, not even when the group is named.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd")))
    func twoUsersRunningTheSameAppSeeNothingOfEachOther() throws {
        let world = try DaemonWorld(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        chmod(world.directory, 0o755)
        let probe = world.directory + "/probe-a"
        try copyExecutable(try builtExecutable("isolation-probe-a").path, to: probe)
        chmod(probe, 0o755)
        let users = (0..<2).map { _ in "la-iso-" + UUID().uuidString.prefix(8).lowercased() }
        for user in users {
            let (status, output) = try UserDatabase.editing {
                try runCapturingOutput(
                    URL(fileURLWithPath: "/usr/sbin/useradd"),
                    ["--no-create-home", "--shell", "/usr/sbin/nologin", user])
            }
            try #require(status == 0, "\(output)")
        }
        defer {
            for user in users {
                _ = UserDatabase.editing { try? runCapturingOutput(URL(fileURLWithPath: "/usr/sbin/userdel"), [user]) }
            }
        }
        func run(as user: String, _ arguments: [String]) throws -> [String: String] {
            // Between another test's fork and its exec, the copy's descriptor can still be open in the child: try
            // again briefly when exec reports the file busy.
            for _ in 0..<50 {
                let result = try runCapturingOutput(
                    URL(fileURLWithPath: "/usr/bin/setpriv"),
                    ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", probe] + arguments,
                    environment: [
                        "LA_DAEMON_SOCKET": world.daemon.socket, "LA_PRESENTER": "none", "HOME": "/nonexistent",
                    ])
                if result.status == 126 && result.output.contains("Text file busy") {
                    usleep(20_000)
                    continue
                }
                return Self.values(result)
            }
            throw POSIXError(.ETXTBSY)
        }
        let first = try run(as: users[0], ["whoami"])
        let group = try #require(first["group"], "\(first)")
        #expect(try run(as: users[1], ["whoami"])["group"] == group, "the same program holds the same group name")
        #expect(try run(as: users[0], ["add", "svc", "mine", "first-secret"])["status"] == "0")
        #expect(try run(as: users[1], ["read", "svc", "mine"])["status"] == String(Self.notFound))
        #expect(try run(as: users[1], ["read", "svc", "mine", group])["status"] == String(Self.notFound))
        #expect(!(try run(as: users[1], ["list"])["accounts"] ?? "").contains("mine"))
        #expect(try run(as: users[1], ["delete", "svc", "mine", group])["status"] == String(Self.notFound))
        #expect(try run(as: users[0], ["read", "svc", "mine"])["value"] == "first-secret")
        // Each user's store is a directory of its own, out of the other's reach.
        for user in users {
            let uid = getpwnam(user)!.pointee.pw_uid
            var info = stat()
            #expect(stat(world.daemon.stateDirectory + "/\(uid)", &info) == 0 && info.st_mode & 0o077 == 0)
        }
    }
}
