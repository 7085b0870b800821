import AppRegistry
import Foundation
import Logging
import SecureCrypto
import SecurityProtocol
import SecurityServer
import SocketPeer
import StoreFiles
import Synchronization

/// The app registry as the daemon uses it: read from `<config-directory>/apps.d` at start, read again when a
/// connection arrives after the directory changed (a file added, edited, replaced or removed), and on SIGHUP.
/// Each read logs the files it leaves out, naming file and line.
final class RegistryWatcher: Sendable {
    let directory: String?
    /// Whether administrative tools get what they claim at the hello (``AdministrativeGrant``).
    let trustsAdministrativeClaims: Bool
    private let registry: Mutex<AppRegistry>
    /// Which process exec'd which registered executable; nil where the machine keeps no such record.
    let execRecord: ExecRecord?

    /// Watches `directory`; nil = no registry (every program unregistered).
    init(directory: String?, trustsAdministrativeClaims: Bool = false, execRecord: ExecRecord? = nil) {
        self.directory = directory
        self.trustsAdministrativeClaims = trustsAdministrativeClaims
        self.execRecord = execRecord
        let registry = directory.map { AppRegistry(directory: $0) } ?? AppRegistry()
        self.registry = Mutex(registry)
        Self.log(registry, directory: directory, execRecord: execRecord)
    }

    /// The registry, read again first if the directory changed since.
    var current: AppRegistry {
        guard let directory else { return AppRegistry() }
        let fingerprint = AppRegistry.Fingerprint(directory: directory)
        if let unchanged = registry.withLock({ $0.fingerprint == fingerprint ? $0 : nil }) { return unchanged }
        return reload()
    }

    /// Reads the directory again (SIGHUP).
    @discardableResult
    func reload() -> AppRegistry {
        guard let directory else { return AppRegistry() }
        let fresh = AppRegistry(directory: directory)
        registry.withLock { $0 = fresh }
        Self.log(fresh, directory: directory, execRecord: execRecord)
        return fresh
    }

    /// Logs what the registry read left out, and has the exec record watch the registered executables.
    private static func log(_ registry: AppRegistry, directory: String?, execRecord: ExecRecord?) {
        guard let directory else { return }
        let paths = registry.registrations.compactMap(\.registration.executable)
        for problem in execRecord?.watch(paths) ?? [] {
            DaemonServer.logger.warning(
                "exec record: a registered executable is not watched", metadata: ["problem": "\(problem)"])
        }
        for problem in registry.problems {
            DaemonServer.logger.error(
                "app registration refused", metadata: ["directory": "\(directory)", "problem": "\(problem)"])
        }
        DaemonServer.logger.info(
            "app registry read",
            metadata: [
                "directory": "\(directory)", "registered": "\(registry.registrations.count)",
                "refused": "\(registry.problems.count)",
            ])
    }

    /// Who `peer` is and which groups it holds on this connection.
    ///
    /// A registered program holds its registration's groups (its `keychain-access-groups`, then its application
    /// identifier); an unregistered one holds one private group, `unregistered.<SHA-256 of its executable>`. The
    /// groups the hello claims only narrow and order what the program holds (claims of groups it does not hold are
    /// ignored and logged). An administrative tool holds its own groups the same way; what it claims beyond them
    /// waits for the user (``AdministrativeGrant``).
    ///
    /// A registration names the program only when its path is the program's very file in localauthd's own mount
    /// namespace (device and inode) and the program is not tainted (``ProgramIntegrity``: another namespace, loader
    /// injection, foreign code mapped, traced). A tainted program holds a private group no untainted program gets,
    /// and no trusted-application list knows its code. An executable not hashed (over the size limit, or over its
    /// user's budget: ``ExecutableDigests``) is named by its file version instead of its digest. Each case is logged.
    ///
    /// Reads and hashes the executable: call it off the threads that serve requests.
    ///
    /// - Throws: ``PeerProcess/Unidentified`` when an unregistered program's executable cannot be read.
    func identity(of peer: PeerProcess, claimed: [String], allGroups: Bool) throws(PeerProcess.Unidentified)
        -> CallerIdentity
    {
        try identification(of: peer, claimed: claimed, allGroups: allGroups).caller
    }

    /// ``identity(of:claimed:allGroups:)``, with the registration that named the program (nil: none did, or it is
    /// tainted).
    func identification(of peer: PeerProcess, claimed: [String], allGroups: Bool) throws(PeerProcess.Unidentified)
        -> (caller: CallerIdentity, registration: AppRegistration?)
    {
        let integrityTaint = peer.integrity().taint
        let digest = peer.digestOutcome()
        let registered = current.registration(path: peer.executable, isFile: peer.runsFile(at:)) {
            peer.executableDigest()
        }
        // A registration by path names a file the exec record watches: the program must have been seen exec'ing it.
        var unseen: String?
        if let path = registered?.registration.executable, let execRecord,
            execRecord.verdict(peer.credentials.pid, runs: peer.executableFile) == .notSeen
        {
            unseen =
                "localauthd saw no exec of \(path) by it: /proc names a file it did not exec (PR_SET_MM_MAP), or it"
                + " exec'd another program since, or it started from a file localauthd was not watching yet"
        }
        let reasons = [unseen, integrityTaint].compactMap { $0 }
        let taint = reasons.isEmpty ? nil : reasons.joined(separator: "; and ")
        let found = taint == nil ? registered : nil
        if let taint {
            DaemonServer.logger.notice(
                "served as unregistered: the program is tainted",
                metadata: [
                    "executable": "\(peer.executable)", "pid": "\(peer.credentials.pid)",
                    "uid": "\(peer.credentials.uid)", "reason": "\(taint)",
                ])
        }
        let held: [String]
        let administrative = found?.registration.isAdministrative ?? false
        if let found {
            held = found.registration.accessGroups
        } else {
            let named: Data
            switch digest {
            case .digest(let value): named = value
            case .unreadable:
                throw PeerProcess.Unidentified(description: "the executable \(peer.executable) cannot be read")
            case .notHashed(let reason):
                DaemonServer.logger.notice(
                    "served as unregistered by file version: the executable was not hashed",
                    metadata: [
                        "executable": "\(peer.executable)", "uid": "\(peer.credentials.uid)", "reason": "\(reason)",
                    ])
                named = peer.fileVersionDigest
            }
            held = [TrustedApplication.unregisteredIdentifier(taint == nil ? named : Self.taintedName(named))]
        }
        let grant =
            administrative
            ? AdministrativeGrant(
                held: held, claimed: claimed, allGroups: allGroups, trustingClaims: trustsAdministrativeClaims) : nil
        let groups: [String]
        if let grant {
            groups = grant.accessGroups
            grant.logHeldBack(executable: peer.executable, registration: found?.file)
        } else {
            let kept = claimed.filter(held.contains)
            let ignored = claimed.filter { !held.contains($0) }
            if !ignored.isEmpty || allGroups {
                DaemonServer.logger.notice(
                    "claims ignored: the program does not hold them",
                    metadata: [
                        "executable": "\(peer.executable)", "groups": "\(ignored.joined(separator: ","))",
                        "allGroups": "\(allGroups)", "registration": "\(found?.file ?? "none")",
                    ])
            }
            groups = kept.isEmpty ? held : kept
        }
        let mayAccessAllGroups = grant?.mayAccessAllGroups ?? false
        let uid = peer.credentials.uid
        let caller = CallerIdentity(
            accessGroups: groups, mayAccessAllGroups: mayAccessAllGroups,
            identified: CallerInfo(
                mode: "daemon", uid: uid, userName: DataLocations.userName(of: uid) ?? String(uid),
                pid: peer.credentials.pid, executable: peer.executable,
                executableDigest: taint == nil ? peer.knownDigest : nil,
                applicationIdentifier: found?.registration.applicationIdentifier, registrationFile: found?.file,
                accessGroups: groups, mayAccessAllGroups: mayAccessAllGroups),
            registeredApplication: { [self] executable, digest in
                current.registration(path: executable) { digest }?.registration.applicationIdentifier
            },
            // Known from the hello on, or never: nothing is hashed on the threads that serve requests.
            codeDigest: { taint == nil ? peer.knownDigest : nil }, heldBackClaim: grant?.heldBack)
        return (caller, found?.registration)
    }

    /// The private group's name for a tainted program whose executable is named `digest`: unlike any digest an
    /// untainted program is named by, so a tainted run of an unregistered app never holds that app's group.
    static func taintedName(_ digest: Data) -> Data {
        var hash = SHA256()
        hash.update(Data("localauthd tainted program".utf8))
        hash.update(digest)
        return hash.finalize()
    }
}
