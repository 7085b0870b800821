import AppRegistry
import Foundation
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue "Caller identity that holds against the user's own programs, and a daemon that no other user can starve":
/// each attack as the issue tried it, as real processes against a real `localauthd` — a user namespace made with
/// `unshare`, a library built here and injected through the loader, interpreters, another user made with `useradd`
/// hashing huge executables and flooding the socket. Each test fails on the daemon before that issue.
@Suite("localauthd: attacks on caller identity", .serialized, .timeLimit(.minutes(6)))
struct IdentityAttackTests {
    typealias Probe = AppIsolationTests.Probe

    static let isRoot = getuid() == 0
    static let notFound = String(AppIsolationTests.notFound)

    /// Probe A installed at `<world>/app` (root's, 0755) and registered by path only, the way the attacks need it,
    /// with its secret stored by the honest app.
    static func registeredApp(_ world: DaemonWorld) throws -> Probe {
        let installed = world.directory + "/app"
        try copyExecutable(try builtExecutable("isolation-probe-a").path, to: installed)
        try DaemonProcess.register(
            AppRegistration(
                applicationIdentifier: "TEAMV.victim", executable: installed, keychainAccessGroups: ["TEAMV.vault"]),
            as: "victim.conf", in: world.daemon.registryDirectory)
        let app = Probe(executable: installed, socket: world.daemon.socket)
        #expect(try app.run(["whoami"])["application"] == "TEAMV.victim")
        #expect(try app.run(["add", "svc", "acct", "victim-secret"])["status"] == "0")
        return app
    }

    /// Runs `command` (argv) with the probes' environment and `extra`; its `key=value` lines.
    static func run(_ command: [String], socket: String, environment extra: [String: String] = [:]) throws
        -> [String: String]
    {
        var environment = inheritedEnvironment(merging: extra)
        environment["LA_DAEMON_SOCKET"] = socket
        environment["LA_PRESENTER"] = "none"
        return AppIsolationTests.values(
            try runCapturingOutput(
                URL(fileURLWithPath: command[0]), Array(command.dropFirst()), environment: environment))
    }

    // MARK: Attack 2: a path-only registration taken over through a user namespace

    /// `unshare -Urm`, a bind mount of another program over the registered path, exec: `/proc/<pid>/exe` reads as
    /// the registered path, but it is another file, in another namespace. The registered app itself run in another
    /// namespace is not the app either.
    @Test(.needsUserNamespaces)
    func aBindMountInAUserNamespaceDoesNotTakeOverARegisteredPath() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let app = try Self.registeredApp(world)
        let impostor = world.directory + "/impostor"
        try copyExecutable(try builtExecutable("isolation-probe-b").path, to: impostor)
        func inNamespace(_ script: String) throws -> [String: String] {
            try Self.run(["/usr/bin/unshare", "-Urm", "sh", "-c", script], socket: world.daemon.socket)
        }
        let mounted = "mount --bind \(impostor) \(app.executable) && exec \(app.executable)"
        let who = try inNamespace(mounted + " whoami")
        try #require(who["group"] != nil, "the program in the namespace ran and asked the daemon: \(who)")
        #expect(who["executable"] == app.executable, "the kernel reports the registered path: \(who)")
        #expect(who["application"] == "", "\(who)")
        let read = try inNamespace(mounted + " read svc acct")
        #expect(read["status"] == Self.notFound && read["value"] == "", "\(read)")
        #expect(
            try inNamespace(mounted + " read svc acct TEAMV.vault")["status"]
                == String(AppIsolationTests.missingEntitlement))
        // The registered program itself, in another namespace, is not the app.
        #expect(try inNamespace("exec \(app.executable) whoami")["application"] == "")
        #expect(world.daemon.logText.contains("runs in another"), "the reason is logged")
        // At home it still is.
        #expect(try app.run(["read", "svc", "acct"])["value"] == "victim-secret")
    }

    // MARK: Issue 47, attacks 1 and 2: an executable swapped with PR_SET_MM_MAP

    /// Why a swapped process is refused, as the daemon logs it, for each way of hiding the swap.
    enum Swap: String, CaseIterable, Sendable {
        /// The swap alone: nothing of the executable it names is mapped.
        case bare
        /// The swap, then the app's first page mapped as code, so that the executable looks mapped: the vDSO pages
        /// it wrote its code into still give it away.
        case withTheAppMapped
        /// Its code in a private copy-on-write mapping of the app's own file, the vDSO left alone: the map names
        /// the app's file, mapped, and only the pages it wrote there give it away.
        case fromACopyOfTheApp
    }

    /// A static program of the user (Tests/Fixtures/ExeSwap) runs its code from the vDSO it made writable, unmaps
    /// its own executable and, through a `CLONE_VM` child in a new user namespace (where it holds
    /// `CAP_CHECKPOINT_RESTORE`), sets the shared memory map's executable to the registered app's file with
    /// `prctl(PR_SET_MM, PR_SET_MM_MAP)`. `/proc/<pid>/exe` then names the app; the daemon, seeing what the swap
    /// left, serves it as an unregistered program: not the app's group, not the app's item.
    @Test(.needsUserNamespaces, .needsTheExeSwapProgram, arguments: Swap.allCases)
    func aProgramThatSwapsItsExecutableForTheAppsIsNotTheApp(_ swap: Swap) throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let app = try Self.registeredApp(world)
        let swapper = try builtExeSwap(in: world.directory)
        let hello = ClientMessage.hello(versions: [1], accessGroups: ["TEAMV.vault"], allGroups: false)
        let read = ClientMessage.keychain(
            2,
            .copyMatching([
                "class": .string("genp"), "svce": .string("svc"), "acct": .string("acct"), "r_Data": .bool(true),
            ]), .nonInteractive, interactive: false)
        var environment = inheritedEnvironment()
        switch swap {
        case .bare: break
        case .withTheAppMapped: environment["EXE_SWAP_MAP_TARGET"] = "1"
        case .fromACopyOfTheApp: environment["EXE_SWAP_COW"] = "1"
        }
        let result = try runCapturingOutput(
            URL(fileURLWithPath: swapper),
            [
                app.executable, world.daemon.socket, PeerProbes.hex(hello),
                PeerProbes.hex(.administration(1, .callerIdentity)), PeerProbes.hex(read),
            ], environment: environment)
        let lines = result.output.split(separator: "\n").map(String.init)
        try #require(result.status == 0 && lines.count == 3, "the swapped program ran and was answered: \(result)")
        guard case .administration(1, .caller(let caller)) = try ServerMessage(decoding: PeerProbes.bytes(lines[1]))
        else {
            Issue.record("no caller identity: \(lines[1])")
            return
        }
        #expect(caller.executable == app.executable, "the kernel names the app's file as its executable")
        #expect(caller.applicationIdentifier == nil, "served as \(caller.applicationIdentifier ?? "")")
        #expect(!caller.accessGroups.contains("TEAMV.vault"))
        let answer = try ServerMessage(decoding: PeerProbes.bytes(lines[2]))
        guard case .keychainFailure(2, let status) = answer else {
            Issue.record("the app's item was answered: \(answer)")
            return
        }
        #expect(
            status.code.rawValue == Self.notFoundCode || status.code.rawValue == AppIsolationTests.missingEntitlement)
        let written = swap == .fromACopyOfTheApp ? "its mapping of \(app.executable)" : "its mapping of [vdso]"
        #expect(world.daemon.logText.contains("it runs code it wrote into \(written)"), "the reason is logged")
        #expect(try app.run(["read", "svc", "acct"])["value"] == "victim-secret", "the app itself still is")
    }

    static let notFoundCode = AppIsolationTests.notFound

    // MARK: Attack 3: loader injection into a registered app

    /// How an injected library reaches the app, and what the daemon sees of it.
    enum Injection: String, CaseIterable, Sendable {
        /// `LD_PRELOAD=evil.so`: seen in the start environment.
        case preload
        /// `LD_AUDIT=evil.so`: seen in the start environment.
        case audit
        /// `LD_LIBRARY_PATH` into a folder the attacker writes.
        case libraryPath
        /// `LD_PRELOAD` of a library that erases the variable from the process's memory as it loads, owned by
        /// another user: only the mapped code gives it away.
        case preloadThatHidesItself
    }

    /// A program whose start carried loader injection never gets its registration's identity: it holds a private
    /// group of its own, not the app's, and not even the unregistered group the same executable would have.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")), arguments: Injection.allCases)
    func aRegisteredAppStartedWithLoaderInjectionIsNotTheApp(_ injection: Injection) throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let app = try Self.registeredApp(world)
        let library = world.directory + "/evil.so"
        let source = world.directory + "/evil.c"
        try """
        #include <stdlib.h>
        #include <string.h>
        extern char **environ;
        unsigned int la_version(unsigned int version) { return version; }
        __attribute__((constructor)) static void start(void) {
            if (!getenv("EVIL_HIDE")) return;
            for (char **entry = environ; *entry; entry++)
                if (strncmp(*entry, "LD_PRELOAD=", 11) == 0) memset(*entry, 'X', strlen(*entry));
        }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let built = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/cc"), ["-shared", "-fPIC", "-o", library, source])
        try #require(built.status == 0, "\(built.output)")
        var environment: [String: String] = [:]
        switch injection {
        case .preload: environment["LD_PRELOAD"] = library
        case .audit: environment["LD_AUDIT"] = library
        case .libraryPath: environment["LD_LIBRARY_PATH"] = world.directory
        case .preloadThatHidesItself:
            environment["LD_PRELOAD"] = library
            environment["EVIL_HIDE"] = "1"
            chown(library, 65534, 65534)
        }
        let who = try app.run(["whoami"], environment: environment)
        #expect(who["application"] == "", "\(who)")
        #expect(who["groups"]?.hasPrefix("unregistered.") == true)
        #expect(who["groups"] != "unregistered." + (try AppIsolationTests.digest(app.executable)))
        let read = try app.run(["read", "svc", "acct"], environment: environment)
        #expect(read["status"] == Self.notFound && read["value"] == "", "\(read)")
        #expect(
            try app.run(["read", "svc", "acct", "TEAMV.vault"], environment: environment)["status"]
                == String(AppIsolationTests.missingEntitlement))
        #expect(world.daemon.logText.contains("served as unregistered: the program is tainted"))
        if injection == .preloadThatHidesItself {
            #expect(world.daemon.logText.contains("which belongs to uid 65534"), "the mapped library gave it away")
        }
        #expect(try app.run(["read", "svc", "acct"])["value"] == "victim-secret", "without injection it is the app")
    }

    // MARK: Attack 4: interpreters

    /// Registering an interpreter would give every script it runs the app's identity: refused unless forced, by
    /// `lactl apps register` and by the daemon reading a file written by hand; a script cannot be registered.
    @Test(.enabled(if: isRoot && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func registeringAnInterpreterIsRefusedUnlessForced() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let configuration = (world.daemon.registryDirectory as NSString).deletingLastPathComponent
        let lactl = try lactlExecutable()
        func register(_ path: String, _ more: [String] = []) throws -> (status: Int32, output: String) {
            try runCapturingOutput(
                lactl,
                [
                    "apps", "register", path, "--application-identifier", "TEAMI.tool", "--config-directory",
                    configuration,
                ]
                    + more)
        }
        let refused = try register("/usr/bin/python3")
        #expect(refused.status != 0)
        #expect(refused.output.contains("runs scripts"), "\(refused.output)")
        let script = world.directory + "/tool.sh"
        try "#!/bin/sh\necho hi\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let scriptRefused = try register(script)
        #expect(scriptRefused.status != 0 && scriptRefused.output.contains("is a script"), "\(scriptRefused.output)")
        let forced = try register("/usr/bin/python3", ["--interpreter"])
        #expect(forced.status == 0, "\(forced.output)")
        let file = try String(contentsOfFile: world.daemon.registryDirectory + "/TEAMI.tool.conf", encoding: .utf8)
        #expect(file.contains("interpreter = yes") && file.contains("sha256 = "), "\(file)")

        // Written by hand without `interpreter = yes`: the daemon refuses the file and says why.
        let python = ("/usr/bin/python3" as NSString).resolvingSymlinksInPath
        try "application-identifier = TEAMJ.python\nexecutable = \(python)\n".write(
            toFile: world.daemon.registryDirectory + "/python.conf", atomically: true, encoding: .utf8)
        let listed = try runCapturingOutput(lactl, ["apps", "list", "--config-directory", configuration])
        #expect(listed.output.contains("refused: python.conf:2: \(python) runs scripts"), "\(listed.output)")
    }

    // MARK: Attack 5: another user starves everyone

    /// A throwaway user, removed by `remove()`.
    struct OtherUser {
        let name = "la-atk-" + UUID().uuidString.prefix(8).lowercased()

        init() throws {
            let made = try UserDatabase.editing {
                try runCapturingOutput(
                    URL(fileURLWithPath: "/usr/sbin/useradd"),
                    ["--no-create-home", "--shell", "/usr/sbin/nologin", name])
            }
            try #require(made.status == 0, "\(made.output)")
        }

        func remove() {
            _ = UserDatabase.editing { try? runCapturingOutput(URL(fileURLWithPath: "/usr/sbin/userdel"), [name]) }
        }

        /// `setpriv` arguments that run a command as this user.
        var asUser: [String] { ["/usr/bin/setpriv", "--reuid=\(name)", "--regid=\(name)", "--clear-groups"] }
    }

    static let canMakeUsers = isRoot && FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd")

    /// Eight sparse 4 GiB executables of another user are never read (over the size limit): they are served at once
    /// as unregistered by file version, and the victim is served meanwhile. A user over its hashing budget is
    /// served the same way, while another user's program is still hashed.
    @Test(.enabled(if: canMakeUsers))
    func anotherUsersHugeExecutablesAreNotHashedAndItsBudgetIsItsOwn() async throws {
        let probeSize =
            try FileManager.default.attributesOfItem(atPath: try builtExecutable("isolation-probe-b").path)[
                .size] as! Int
        // Room for one probe's hash per user per minute, not two.
        let world = try DaemonWorld(extraEnvironment: ["LA_DIGEST_BUDGET": String(probeSize * 3 / 2)])
        defer { world.close() }
        chmod(world.directory, 0o755)
        let user = try OtherUser()
        defer { user.remove() }
        let victim = try Self.registeredApp(world)
        var huge: [String] = []
        for index in 0..<8 {
            let path = world.directory + "/huge-\(index)"
            try copyExecutable(try builtExecutable("isolation-probe-b").path, to: path)
            try #require(truncate(path, 4 << 30) == 0)
            huge.append(path)
        }
        let attackers = huge.map { path in
            Task.detached {
                try Self.run(user.asUser + [path, "whoami"], socket: world.daemon.socket, environment: ["HOME": "/"])
            }
        }
        #expect(try victim.run(["read", "svc", "acct"])["value"] == "victim-secret")
        for attacker in attackers {
            let who = try await attacker.value
            #expect(who["groups"]?.hasPrefix("unregistered.") == true, "\(who)")
        }
        #expect(world.daemon.logText.contains("served as unregistered by file version"))
        #expect(world.daemon.logText.contains("over the limit of"))

        // The budget: the user's first program is hashed, a second executable (another file) is not; another
        // user's is.
        let first = world.directory + "/small-1"
        let second = world.directory + "/small-2"
        try copyExecutable(try builtExecutable("isolation-probe-b").path, to: first)
        try copyExecutable(try builtExecutable("isolation-probe-b").path, to: second)
        let content = "unregistered." + (try AppIsolationTests.digest(first))
        #expect(try Self.run(user.asUser + [first, "whoami"], socket: world.daemon.socket)["groups"] == content)
        let overBudget = try Self.run(user.asUser + [second, "whoami"], socket: world.daemon.socket)
        #expect(overBudget["groups"] != content && overBudget["groups"]?.hasPrefix("unregistered.") == true)
        #expect(world.daemon.logText.contains("bytes of executables hashed within"))
        let bystander = try OtherUser()
        defer { bystander.remove() }
        #expect(
            try Self.run(bystander.asUser + [second, "whoami"], socket: world.daemon.socket)["groups"] == content,
            "another user's budget is its own")
    }

    /// Another user's connections each declaring a 60 MiB frame: localauthd holds at most its per-user budget of
    /// them (the others are refused), stays far below the gigabyte they asked for, and serves the victim. Before a
    /// hello, a frame over 64 KiB is refused at once.
    @Test(.enabled(if: canMakeUsers))
    func anotherUsersFloodOfLargeFramesIsBoundedAndTheVictimIsServed() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        chmod(world.directory, 0o755)
        let user = try OtherUser()
        defer { user.remove() }
        let victim = try Self.registeredApp(world)
        let probe = world.directory + "/flooder"
        try copyExecutable(try builtExecutable("isolation-probe-b").path, to: probe)
        func flood(_ hello: Bool) throws -> (SpawnedProcess, [String: String]) {
            let log = world.directory + "/flood-\(hello).log"
            let process = try SpawnedProcess(
                "/usr/bin/setpriv",
                Array(user.asUser.dropFirst()) + [probe, "flood", world.daemon.socket, "16", String(60 << 20)]
                    + (hello ? ["hello"] : []),
                environment: ["HOME": "/", "LA_DAEMON_SOCKET": world.daemon.socket], log: log)
            let deadline = Date().addingTimeInterval(120)
            var text = ""
            while Date() < deadline {
                text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                if text.contains("holding") { break }
                usleep(50_000)
            }
            return (process, AppIsolationTests.values((0, text)))
        }
        let (early, beforeHello) = try flood(false)
        defer { early.stop(SIGKILL) }
        #expect(beforeHello["opened"] == "0", "\(beforeHello)")
        let (flooder, afterHello) = try flood(true)
        defer { flooder.stop(SIGKILL) }
        #expect(afterHello["opened"].flatMap { Int($0) }.map { $0 <= 1 } == true, "\(afterHello)")
        #expect(afterHello["refused"].flatMap { Int($0) }.map { $0 >= 15 } == true, "\(afterHello)")
        let resident = try Self.residentBytes(of: world.daemon.pid)
        #expect(resident < 400 << 20, "localauthd holds \(resident >> 20) MiB during the flood")
        #expect(try victim.run(["read", "svc", "acct"])["value"] == "victim-secret")
    }

    /// Another user's client that writes 4,000 lookups of a 1 MiB item and reads no answer: localauthd stops reading
    /// from it once its answers wait (its socket fills and it can write no more), holds far less than the 4 GiB it
    /// asked for, serves the victim meanwhile, and closes the connection once the client read nothing for the
    /// stall limit (`LA_READ_STALL`, 5 s here). Before, the daemon read every request and kept every answer.
    @Test(.enabled(if: canMakeUsers))
    func aClientThatReadsNoAnswerHoldsLittleAndIsDisconnected() throws {
        let world = try DaemonWorld(extraEnvironment: ["LA_READ_STALL": "5"])
        defer { world.close() }
        chmod(world.directory, 0o755)
        let user = try OtherUser()
        defer { user.remove() }
        let victim = try Self.registeredApp(world)
        let probe = world.directory + "/unread"
        try copyExecutable(try builtExecutable("isolation-probe-b").path, to: probe)
        let log = world.directory + "/unread.log"
        let process = try SpawnedProcess(
            "/usr/bin/setpriv", Array(user.asUser.dropFirst()) + [probe, "unread", world.daemon.socket, "4000"],
            environment: ["HOME": "/"], log: log)
        defer { process.stop(SIGKILL) }
        var text = ""
        for _ in 0..<1_200 where !text.contains("holding") {
            usleep(50_000)
            text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        }
        let values = AppIsolationTests.values((0, text))
        let written = try #require(values["written"].flatMap { Int($0) }, "\(text)")
        #expect(written > 0 && written < 4_000, "the client wrote \(written) lookups before its socket stayed full")
        let resident = try Self.residentBytes(of: world.daemon.pid)
        #expect(resident < 400 << 20, "localauthd holds \(resident >> 20) MiB for a client that reads nothing")
        #expect(try victim.run(["read", "svc", "acct"])["value"] == "victim-secret")
        // Closed within the stall limit and the watch's period after the answers began to wait.
        var closed = false
        for _ in 0..<300 where !closed {
            usleep(50_000)
            let daemonLog = (try? String(contentsOfFile: world.daemon.log, encoding: .utf8)) ?? ""
            closed = daemonLog.contains("closed a connection whose client does not read")
        }
        #expect(closed, "localauthd closed the connection of the client that does not read")
    }

    /// A connection that never says hello is closed; one user's connections are capped while another user's
    /// program is still served.
    @Test(.enabled(if: canMakeUsers))
    func silentConnectionsAreClosedAndOneUserCannotTakeEveryConnection() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        chmod(world.directory, 0o755)
        let user = try OtherUser()
        defer { user.remove() }
        var silent: [Int32] = []
        defer { silent.forEach { close($0) } }
        for _ in 0..<130 { silent.append(try Self.connect(world.daemon.socket)) }
        // The connections over the cap are refused at once (a refusal, then the end).
        var answer = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(silent[129], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let refusal = recv(silent[129], &answer, answer.count, 0)
        #expect(
            refusal > 0 && String(decoding: answer[0..<max(refusal, 0)], as: UTF8.self).contains("connections open"))
        let probe = world.directory + "/other"
        try copyExecutable(try builtExecutable("isolation-probe-b").path, to: probe)
        let other = try Self.run(
            user.asUser + [probe, "whoami"], socket: world.daemon.socket, environment: ["HOME": "/"])
        #expect(other["groups"]?.hasPrefix("unregistered.") == true, "another user is served: \(other)")
        // A silent connection is closed within the hello timeout (5 s).
        timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(silent[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let started = Date()
        var ended = false
        while Date().timeIntervalSince(started) < 20 {
            let count = recv(silent[0], &answer, answer.count, 0)
            if count == 0 { ended = true; break }
            if count < 0 { break }
        }
        #expect(ended, "the silent connection was closed")
    }

    static func connect(_ path: String) throws -> Int32 {
        try SocketClient.connectBare(path).descriptor
    }

    /// `VmRSS` of process `pid`, in bytes.
    static func residentBytes(of pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        let kilobytes = try #require(Int(line.split(separator: " ").dropFirst().first ?? ""))
        return kilobytes * 1024
    }
}
