import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A damaged or read-only store (issue 39), through a real localauthd serving two users (root, the test, and
/// nobody, through `setpriv` and lactl): the damaged user gets errors that name the file, never a crash; the other
/// user is served throughout; `lactl keychain check` reports the damage and `lactl keychain import
/// --replace-damaged` recovers from a backup, keeping the damaged file aside.
@Suite("localauthd: a damaged or read-only store", .serialized, .timeLimit(.minutes(4)))
struct DamagedStoreTests {
    static let canRunAsNobody =
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")

    /// How the file is damaged while localauthd is stopped.
    enum Damage: String, CaseIterable, Sendable {
        /// A leaf page of the item table overwritten with a pattern (a bad sector, a stray write).
        case pageOverwritten
        /// The file cut to half its length (a copy that stopped, a filesystem that lost its tail).
        case truncated
        /// The header page overwritten: the file is no longer an SQLite database at all.
        case headerOverwritten
    }

    static let itemCount = 120
    static let backupPassword = "backup horse battery"

    @Test(.enabled(if: canRunAsNobody), arguments: Damage.allCases)
    func aDamagedDatabaseIsReportedAndRecoveredFromABackup(damage: Damage) async throws {
        let world = try World()
        defer { world.close() }
        var daemon = try DaemonProcess(directory: world.directory)
        var client = try daemon.client()
        for index in 0..<Self.itemCount { _ = try await client.send(.add(Self.item(index))) }
        // The backup, written as lactl would; one item added after it is what the restore cannot bring back.
        guard
            case .exportedBackup(let contents, let count, _) = try await client.send(
                .exportBackup(password: SecureBytes(Array(Self.backupPassword.utf8))))
        else { throw CocoaError(.coderInvalidValue) }
        #expect(count == Self.itemCount)
        try BackupFiles.write(contents, to: URL(fileURLWithPath: world.backup))
        _ = try await client.send(.add(Self.item(Self.itemCount)))
        #expect(
            try world.asNobody(daemon, ["keychain", "add-generic-password", "-s", "n", "-a", "n", "-w", "n-pw"]).status
                == 0)
        daemon.stop()

        let database = daemon.stateDirectory + "/0/keychain.db"
        try Self.damage(database, damage)

        daemon = try DaemonProcess(directory: world.directory)
        defer { if daemon.isRunning { daemon.stop() } }
        // The damaged user: errSecNotAvailable (what Apple's SecItem gives for SQLITE_CORRUPT), naming the file.
        var failure: KeychainStatus?
        do {
            client = try daemon.client()
            _ = try await client.send(.copyMatching(Self.everyItem))
        } catch let status as KeychainStatus {
            failure = status
        }
        #expect(failure?.code == .notAvailable, "\(String(describing: failure))")
        #expect(failure?.message.contains(database) == true, "\(String(describing: failure))")
        // The other user is served, and the daemon did not stop.
        let other = try world.asNobody(daemon, ["keychain", "find-generic-password", "-s", "n", "-a", "n", "-w"])
        #expect(other.status == 0 && other.output.contains("n-pw"), "\(other.output)")

        // lactl, a tool for people, prints the engine's words beside Apple's message for the status.
        let dump = try world.lactl(daemon, ["keychain", "dump"])
        #expect(dump.status == 1 && dump.output.contains(database), "\(dump.output)")

        let check = try world.lactl(daemon, ["keychain", "check"])
        #expect(check.status == 1, "\(check.output)")
        #expect(check.output.contains("damaged:") && check.output.contains(database), "\(check.output)")
        #expect(check.output.contains("lactl keychain import --replace-damaged"), "\(check.output)")
        // An ordinary import is not a repair: the file stays damaged.
        let wrongPassword = try world.lactl(
            daemon, ["keychain", "import", "--replace-damaged", world.backup], input: "not the password")
        #expect(wrongPassword.status == 1, "\(wrongPassword.output)")
        #expect(FileManager.default.fileExists(atPath: database))
        #expect(try Self.setAside(in: daemon.stateDirectory + "/0").isEmpty, "nothing moves for a wrong password")

        let restore = try world.lactl(
            daemon, ["keychain", "import", "--replace-damaged", world.backup], input: Self.backupPassword)
        #expect(restore.status == 0, "\(restore.output)")
        #expect(restore.output.contains("restored \(Self.itemCount) items"), "\(restore.output)")
        let aside = try Self.setAside(in: daemon.stateDirectory + "/0")
        #expect(aside.count == 1, "the damaged file is kept: \(aside)")
        #expect(restore.output.contains(aside.first ?? "?"), "\(restore.output)")

        // Every backed-up item is back with its value, on the same connection that saw the damage.
        client = try daemon.client()
        for index in 0..<Self.itemCount {
            #expect(try await Self.value(index, client) == Self.value(index), "item \(index)")
        }
        #expect(try await Self.value(Self.itemCount, client) == nil, "added after the backup: not in it")
        let healthy = try world.lactl(daemon, ["keychain", "check"])
        #expect(healthy.status == 0 && healthy.output.contains("ok"), "\(healthy.output)")
        let sound = try world.lactl(
            daemon, ["keychain", "import", "--replace-damaged", world.backup], input: Self.backupPassword)
        #expect(sound.status == 1 && sound.output.contains("is not damaged"), "\(sound.output)")
        #expect(
            try world.asNobody(daemon, ["keychain", "find-generic-password", "-s", "n", "-a", "n", "-w"]).status == 0)
        #expect(daemon.isRunning)
    }

    /// The store's directory made read-only (a bind mount, as a filesystem remounted read-only after errors
    /// leaves it): the user's connection is refused with the file and the reason, the other user is served, and once
    /// the filesystem is writable again the store opens with everything in it.
    @Test(.enabled(if: canRunAsNobody && FullDiskTests.canMount))
    func aReadOnlyStoreIsRefusedByNameAndTheOtherUserIsServed() async throws {
        let world = try World()
        defer { world.close() }
        var daemon = try DaemonProcess(directory: world.directory)
        _ = try await daemon.client().send(.add(Self.item(1)))
        #expect(
            try world.asNobody(daemon, ["keychain", "add-generic-password", "-s", "n", "-a", "n", "-w", "n-pw"]).status
                == 0)
        daemon.stop()

        let store = daemon.stateDirectory + "/0"
        #expect(mount(store, store, nil, UInt(MS_BIND), nil) == 0)
        defer { umount2(store, Int32(MNT_DETACH)) }
        #expect(mount(nil, store, nil, UInt(MS_REMOUNT | MS_BIND | MS_RDONLY), nil) == 0)
        do {
            daemon = try DaemonProcess(directory: world.directory)
        } catch {
            Issue.record("\(error): \((try? String(contentsOfFile: daemon.log, encoding: .utf8)) ?? "")")
            return
        }
        defer { if daemon.isRunning { daemon.stop() } }
        var failure: KeychainStatus?
        do {
            _ = try await daemon.client().send(.copyMatching(Self.everyItem))
        } catch let status as KeychainStatus {
            failure = status
        }
        #expect(failure?.code == .notAvailable, "\(String(describing: failure))")
        #expect(failure?.message.contains(store) == true, "\(String(describing: failure))")
        #expect(failure?.message.contains("Read-only file system") == true, "\(String(describing: failure))")
        let other = try world.asNobody(daemon, ["keychain", "find-generic-password", "-s", "n", "-a", "n", "-w"])
        #expect(other.status == 0 && other.output.contains("n-pw"), "\(other.output)")

        #expect(umount2(store, 0) == 0)
        #expect(try await Self.value(1, daemon.client()) == Self.value(1))
        #expect(daemon.isRunning)
    }

    // MARK: - The world

    /// A directory for one daemon, open to nobody (the socket is 0666; the state stays 0700 per user), with a
    /// copy of lactl nobody may run.
    struct World {
        let directory: String
        let lactlCopy: String
        var backup: String { directory + "/keychain.backup" }

        init() throws {
            var template = Array("/tmp/la-damage-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
            directory = String(cString: made)
            chmod(directory, 0o755)
            lactlCopy = directory + "/lactl"
            try copyExecutable(try lactlExecutable().path, to: lactlCopy)
            chmod(lactlCopy, 0o755)
        }

        func close() { try? FileManager.default.removeItem(atPath: directory) }

        /// lactl as root through `daemon`, `input` on its standard input (a backup password).
        func lactl(_ daemon: DaemonProcess, _ arguments: [String], input: String? = nil) throws -> (
            status: Int32, output: String
        ) {
            try run(try lactlExecutable().path, arguments, daemon: daemon, input: input)
        }

        /// lactl as nobody through `daemon`.
        func asNobody(_ daemon: DaemonProcess, _ arguments: [String]) throws -> (status: Int32, output: String) {
            try run(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", lactlCopy] + arguments,
                daemon: daemon)
        }

        private func run(
            _ executable: String, _ arguments: [String], daemon: DaemonProcess, input: String? = nil
        ) throws -> (status: Int32, output: String) {
            let name = UUID().uuidString
            let log = directory + "/run-\(name).log"
            var inputFile: String?
            if let input {
                inputFile = directory + "/input-\(name)"
                #expect(
                    FileManager.default.createFile(
                        atPath: inputFile!, contents: Data((input + "\n").utf8), attributes: [.posixPermissions: 0o600])
                )
            }
            defer { if let inputFile { unlink(inputFile) } }
            let process = try SpawnedProcess(
                executable, arguments,
                environment: ["LA_DAEMON_SOCKET": daemon.socket, "LA_PRESENTER": "none", "HOME": "/nonexistent"],
                log: log, input: inputFile)
            let exit = process.wait(timeout: 60) ?? process.stop(SIGKILL)
            return (exit.status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }
    }

    /// Damages `database` (localauthd stopped) after folding its WAL in, so the damage is what SQLite reads.
    static func damage(_ database: String, _ damage: Damage) throws {
        let sqlite = URL(fileURLWithPath: "/usr/bin/sqlite3")
        let checkpoint = try runCapturingOutput(sqlite, [database, "PRAGMA wal_checkpoint(TRUNCATE);"])
        #expect(checkpoint.status == 0, "\(checkpoint.output)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int)
        let pageSize = 4096
        #expect(size >= 8 * pageSize, "a database of several pages (\(size) bytes)")
        switch damage {
        case .pageOverwritten:
            // A leaf page of the item table, from SQLite's own page map (dbstat).
            let pages = try runCapturingOutput(
                sqlite, [database, "SELECT pageno FROM dbstat WHERE name = 'item' AND pagetype = 'leaf';"])
            let leaves = pages.output.split(separator: "\n").compactMap { Int($0) }
            let page = try #require(leaves.dropFirst(leaves.count / 2).first, "\(pages.output)")
            try overwrite(database, at: (page - 1) * pageSize, count: pageSize)
        case .truncated:
            #expect(truncate(database, off_t(size / 2 / pageSize * pageSize)) == 0)
        case .headerOverwritten:
            try overwrite(database, at: 0, count: 100)
        }
    }

    private static func overwrite(_ file: String, at offset: Int, count: Int) throws {
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: Data(repeating: 0x5A, count: count))
    }

    /// The damaged files set aside in `store`.
    static func setAside(in store: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: store)
            .filter { $0.hasPrefix("keychain.db.damaged-") && !$0.hasSuffix("-wal") }
            .map { store + "/" + $0 }
    }

    static let everyItem: [String: KeychainValue] = [
        "class": .string("genp"), "svce": .string("damage"), "m_Limit": .string("m_LimitAll"),
        "r_Attributes": .bool(true),
    ]

    static func value(_ index: Int) -> Data {
        Data((0..<1_500).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) })
    }

    static func item(_ index: Int) -> [String: KeychainValue] {
        [
            "class": .string("genp"), "svce": .string("damage"), "acct": .string("item-\(index)"),
            "v_Data": .secret(SecureBytes(Array(value(index)))),
        ]
    }

    /// Item `index`'s value as `client` finds it; nil when there is none.
    static func value(_ index: Int, _ client: SocketClient) async throws -> Data? {
        var query = item(index)
        query["v_Data"] = nil
        query["r_Data"] = .bool(true)
        do {
            guard case .items(let found) = try await client.send(.copyMatching(query)) else { return nil }
            return found.items.first?.data?.unprotectedData()
        } catch let status as KeychainStatus where status.code == .itemNotFound {
            return nil
        }
    }
}
