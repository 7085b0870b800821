import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 48, per-program access: a keychain request an administrative tool makes on behalf of another program of
/// its user (`EvaluationOptions.subject`, what `lactl secret-service` sends for a D-Bus client). localauthd
/// identifies the named process itself; trusted-application lists are checked against it; no one else may name one.
@Suite("Keychain requests on behalf of another program")
struct RepresentedProgramTests {
    /// A `sleep` of the test's, as the program asked for; `user` runs it as another user.
    static func program(asUser user: String? = nil) throws -> SpawnedProcess {
        guard let user else { return try SpawnedProcess("/bin/sleep", ["600"]) }
        return try SpawnedProcess(
            "/usr/bin/setpriv", ["--reuid", user, "--regid", "65534", "--clear-groups", "/bin/sleep", "600"])
    }

    /// The process `program` runs once it runs its final executable (`setpriv` execs it) and waits in it, named as
    /// a request names it. Waited for until it sleeps: right after its `exec`, `/proc` names the new executable before
    /// the kernel and the loader have mapped its code, and a process caught then is tainted ("no code of its
    /// executable is mapped"), as a D-Bus client never is by its first call.
    static func reference(_ program: SpawnedProcess, running executable: String) throws -> ProcessReference {
        let deadline = Date().addingTimeInterval(60)
        var sleeping = 0
        while Date() < deadline {
            if (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(program.pid)/exe")) == executable,
                Self.state(program.pid) == "S"
            {
                sleeping += 1
                if sleeping >= 2, let found = ProcessReference.runningWithExecutable(program.pid) { return found }
            } else {
                sleeping = 0
            }
            usleep(50_000)
        }
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable) did not start"])
    }

    /// The scheduler state of process `pid` (`/proc/<pid>/stat` field 3: R, S, D…); nil when it is gone.
    static func state(_ pid: Int32) -> Substring? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: end)...].split(separator: " ").first
    }

    static func options(_ subject: ProcessReference?) -> EvaluationOptions {
        EvaluationOptions(prompt: EvaluationPrompt(reason: ""), subject: subject)
    }

    /// The status `body` fails with; nil when it succeeds.
    static func status(_ body: () throws -> Void) -> KeychainStatus.Code? {
        do {
            try body()
            return nil
        } catch let status as KeychainStatus {
            return status.code
        } catch {
            return .internalComponent
        }
    }

    static let item: [String: KeychainValue] = [
        "class": .string("genp"), "svce": .string("represented"), "acct": .string("a"),
    ]

    /// An item added on behalf of a program trusts that program ("the calling program" names it): its read on that
    /// program's behalf is served, the deputy's own read and another program's are not (no one to ask here), and
    /// neither is a read naming the program's pid with another start time (a reused pid), nor a process of another
    /// user.
    @Test func theNamedProgramIsTheOneItsItemsTrust() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client(accessGroups: ["test.daemon"])
        let sleeper = try Self.program()
        defer { sleeper.stop(SIGKILL) }
        let subject = try Self.reference(sleeper, running: "/usr/bin/sleep")
        var added = Self.item
        added["v_Data"] = .secret(SecureBytes(Array("for-sleep".utf8)))
        added["acls"] = .access(ItemAccess(descriptor: "represented", applications: [.caller]))
        _ = try client.sendBlocking(.add(added), options: Self.options(subject), presenter: nil)

        var read = Self.item
        read["r_Data"] = .bool(true)
        /// The status the read fails with on behalf of `subject` (nil: the deputy's own); nil when served.
        func readStatus(_ subject: ProcessReference?) -> KeychainStatus.Code? {
            Self.status {
                _ = try client.sendBlocking(.copyMatching(read), options: Self.options(subject), presenter: nil)
            }
        }
        let served = try client.sendBlocking(.copyMatching(read), options: Self.options(subject), presenter: nil)
        guard case .items(let results) = served, let data = results.items.first?.data else {
            Issue.record("the named program's read was not served: \(served)")
            return
        }
        #expect(String(decoding: data.unprotectedData(), as: UTF8.self) == "for-sleep")
        #expect(readStatus(nil) == .interactionNotAllowed, "the deputy itself is not on the list")

        let other = try SpawnedProcess("/usr/bin/tail", ["-f", "/dev/null"])
        defer { other.stop(SIGKILL) }
        let otherSubject = try Self.reference(other, running: "/usr/bin/tail")
        #expect(readStatus(otherSubject) == .interactionNotAllowed, "another program is not on the list")

        let otherFile = try #require(ProcessReference.ExecutableFile(runBy: other.pid))
        for (named, why) in [
            (
                ProcessReference(pid: subject.pid, startTime: subject.startTime, executable: otherFile),
                "a process that runs another file than the one named (it exec'd since)"
            ),
            (
                ProcessReference(pid: subject.pid, startTime: subject.startTime, executable: nil),
                "a subject that does not say which file it runs"
            ),
        ] {
            #expect(readStatus(named) == .authFailed, "\(why) is refused")
        }

        let reused = ProcessReference(
            pid: subject.pid, startTime: subject.startTime + 1, executable: subject.executable)
        #expect(
            readStatus(reused) == .authFailed, "a pid whose process started at another time is not the one named")

        let foreign = try Self.program(asUser: "nobody")
        defer { foreign.stop(SIGKILL) }
        let foreignSubject = try Self.reference(foreign, running: "/usr/bin/sleep")
        #expect(readStatus(foreignSubject) == .authFailed, "another user's process is refused")
        #expect(world.daemon.isRunning)
    }

    /// A key request naming a subject is refused, and the connection with it (only keychain requests are made on
    /// behalf of another program); the daemon serves the next connection.
    @Test func aKeyRequestNamingASubjectIsRefused() throws {
        let world = try DaemonWorld()
        defer { world.close() }
        let client = try world.daemon.client(accessGroups: ["test.daemon"])
        let sleeper = try Self.program()
        defer { sleeper.stop(SIGKILL) }
        let subject = try Self.reference(sleeper, running: "/usr/bin/sleep")
        #expect(
            Self.status {
                _ = try client.sendBlocking(
                    KeyRequest.attestationIdentity, options: Self.options(subject), presenter: nil)
            } != nil)
        let next = try world.daemon.client(accessGroups: ["test.daemon"])
        #expect(
            Self.status {
                _ = try next.sendBlocking(.copyMatching(Self.item), options: Self.options(nil), presenter: nil)
            } == .itemNotFound)
        #expect(world.daemon.logText.contains("made for the caller itself"), "the refusal is logged")
    }

    /// A program that is not an administrative tool of the registry cannot ask on behalf of another: the request
    /// is refused before anything is read, while the same request for itself is served.
    @Test func onlyAnAdministrativeToolNamesAnotherProgram() throws {
        var template = Array("/tmp/la-represented-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // No registrations: the test runner is an unregistered program here.
        let daemon = try DaemonProcess(directory: directory, registrations: [:])
        defer { daemon.stop() }
        let client = try daemon.client(accessGroups: [])
        let sleeper = try Self.program()
        defer { sleeper.stop(SIGKILL) }
        let subject = try Self.reference(sleeper, running: "/usr/bin/sleep")
        #expect(
            Self.status {
                _ = try client.sendBlocking(.copyMatching(Self.item), options: Self.options(nil), presenter: nil)
            }
                == .itemNotFound)
        #expect(
            Self.status {
                _ = try client.sendBlocking(.copyMatching(Self.item), options: Self.options(subject), presenter: nil)
            } == .authFailed)
    }
}
