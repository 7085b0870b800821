import CGio
import CSecretBus
import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol

/// The freedesktop Secret Service (`org.freedesktop.secrets`, API 0.2) over the keychain, on a session bus: what
/// `secret-tool`, libsecret, Python's `secretstorage` and `keyring` speak. Calls are answered in order, one at a time:
/// reads of known connections on GDBus's worker thread while nothing waits, everything else on the serving thread.
///
/// Collections: `login` (aliased `default` unless set otherwise; an alias is also reachable as
/// `/org/freedesktop/secrets/aliases/<alias>`) and those made with `CreateCollection` keep their items in the keychain
/// (``KeychainSecrets``, the registry in ``CollectionRegistry``) and lock with it; `session` keeps them in this
/// process's memory only. Sessions:
/// `plain` and `dh-ietf1024-sha256-aes128-cbc-pkcs7` (``SecureCrypto/SecretServiceSession``), each usable only by
/// the connection that opened it.
package final class SecretServiceProvider {
    /// Why the provider cannot start or stopped.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    static let root = "/org/freedesktop/secrets"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let sessionInterface = "org.freedesktop.Secret.Session"
    static let promptInterface = "org.freedesktop.Secret.Prompt"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let persisted = "login"
    static let inMemory = "session"
    static let defaultAlias = "default"

    private let bus: OpaquePointer
    private let store = KeychainSecrets()
    /// The persisted collections' names as last listed: the collections whose `Locked` a lock or unlock changes.
    private let persistedNames = SharedNames([persisted])
    private let log: (String) -> Void

    private enum Transfer: Sendable {
        case plain
        case encrypted(SecretServiceSession)
    }

    private struct Session {
        var owner: String
        var transfer: Transfer
        /// Its order of opening.
        var number: Int
    }

    /// The most sessions kept open at once.
    static let sessionLimit = 1024

    private var sessions: [String: Session] = [:]
    /// The unlock prompts handed out and not yet completed.
    private let prompts = PromptTable()
    private var nextSession = 1
    /// The `session` collection's items and their secrets.
    private var memory: [String: (item: StoredSecretItem, secret: SecureBytes)] = [:]
    /// The file the program that made each `session` item runs (device and inode, the same in every mount
    /// namespace): only a program running that file reads, changes or deletes it.
    private var memoryOwners: [String: ProcessReference.ExecutableFile] = [:]
    /// Each client connection's process as first seen (its pid and start time), by unique name: a bus never gives
    /// a unique name twice, and a pid reused later is told apart by its start time.
    private var subjects: [String: ProcessReference] = [:]
    /// The most client connections remembered at once; past it, those whose name is gone are forgotten, and while
    /// that many remain, a new one is refused (a connection is never looked up again while it lasts).
    static let subjectLimit = 4096

    /// Connects to the bus at `address` (nil: `DBUS_SESSION_BUS_ADDRESS`) and takes `org.freedesktop.secrets`; from
    /// an owner that allows it when `replace`.
    ///
    /// - Throws: ``Failure`` naming the program that owns the name, or why the bus is unreachable.
    package init(address: String? = nil, replace: Bool = false, log: @escaping (String) -> Void) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard let bus = la_secret_bus_open(address, &error) else {
            defer { g_free(error) }
            throw Failure(description: error.map { String(cString: $0) } ?? "cannot connect to the session bus")
        }
        // Queued from before the name is ours: a client that sees the name owned may call at once.
        la_secret_bus_start(bus)
        var owner: UnsafeMutablePointer<CChar>?
        var ownerPid: guint32 = 0
        let owned = la_secret_bus_own(bus, "org.freedesktop.secrets", replace ? 1 : 0, &owner, &ownerPid, &error)
        defer {
            g_free(owner)
            g_free(error)
        }
        guard owned == 1 else {
            la_secret_bus_close(bus)
            if owned < 0 {
                throw Failure(description: error.map { String(cString: $0) } ?? "cannot take org.freedesktop.secrets")
            }
            let program =
                ownerPid == 0
                ? "another program"
                : ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(ownerPid)/exe"))
                    .map { "\($0) (pid \(ownerPid))" } ?? "process \(ownerPid)")
            throw Failure(
                description: "org.freedesktop.secrets is owned by \(program)"
                    + (replace
                        ? ", which does not let another program take it over: stop it first"
                        : ": stop it, or take the name over with --replace"))
        }
        self.bus = bus
        self.log = log
    }

    deinit { la_secret_bus_close(bus) }

    /// Serves until the name is lost (another provider took it over with `--replace`) or the bus goes away.
    package func serve() -> String {
        log("serving org.freedesktop.secrets as \(String(cString: la_secret_bus_unique_name(bus)))")
        // Each lock and unlock, by whatever program, changes the login collection's Locked.
        let signals = Signals(bus: bus)
        store.watch { [persistedNames] locked in signals.lockChanged(locked, collections: persistedNames.get()) }
        la_secret_bus_answer_on_worker(
            bus,
            { context, call in
                guard let context, let call else { return 0 }
                let provider = Unmanaged<SecretServiceProvider>.fromOpaque(context).takeUnretainedValue()
                return provider.answerOnWorker(call) ? 1 : 0
            }, Unmanaged.passUnretained(self).toOpaque())
        defer {
            la_secret_bus_answer_on_worker(bus, nil, nil)
            // Calls kept behind a read still waiting for the user are never answered now: their references go.
            for call in waitingBehindReads.values.joined() { g_object_unref(UnsafeMutableRawPointer(call)) }
            waitingBehindReads.removeAll()
        }
        while true {
            let next = la_secret_bus_next(bus, 1_000)
            releaseFinishedReads()
            guard let call = next else {
                if let ended = la_secret_bus_ended(bus) { return String(cString: ended) }
                continue
            }
            defer {
                la_secret_bus_done(bus)
                g_object_unref(UnsafeMutableRawPointer(call))
            }
            let sender = g_dbus_message_get_sender(call).map { String(cString: $0) } ?? ""
            if asking.isBusy(sender) {
                // Behind its connection's read that waits for the user: answered in order once that one is.
                g_object_ref(UnsafeMutableRawPointer(call))
                waitingBehindReads[sender, default: []].append(call)
                continue
            }
            handle(call)
        }
    }

    /// The connections whose secret read waits for the user on a thread of its own.
    private let asking = AskingConnections()
    /// The calls that came from those connections meanwhile (a reference held on each), in order.
    private var waitingBehindReads: [String: [OpaquePointer]] = [:]

    /// Answers, in order, the calls that waited behind reads that have finished, until one of them waits for the
    /// user in turn.
    private func releaseFinishedReads() {
        let finished = asking.takeFinished()
        guard !finished.isEmpty else { return }
        // Never beside the worker thread: it answers again once these are.
        la_secret_bus_hold(bus)
        defer { la_secret_bus_done(bus) }
        for sender in finished {
            var calls = waitingBehindReads.removeValue(forKey: sender) ?? []
            // Still busy while its kept calls are answered: the worker leaves its newer calls to the queue, behind.
            while !calls.isEmpty {
                let call = calls.removeFirst()
                handle(call)
                g_object_unref(UnsafeMutableRawPointer(call))
                if asking.isAsking(sender) {
                    waitingBehindReads[sender] = calls
                    break
                }
            }
            if !asking.isAsking(sender) { asking.release(sender) }
        }
    }

    // MARK: Dispatch

    /// A D-Bus error reply.
    struct BusError: Error {
        var name: String
        var text: String

        static func noSuchObject(_ path: String) -> BusError {
            BusError(name: "org.freedesktop.Secret.Error.NoSuchObject", text: "no such object: \(path)")
        }
        static func invalidArguments(_ text: String) -> BusError {
            BusError(name: "org.freedesktop.DBus.Error.InvalidArgs", text: text)
        }
        static func notSupported(_ text: String) -> BusError {
            BusError(name: "org.freedesktop.DBus.Error.NotSupported", text: text)
        }
        static func accessDenied(_ text: String) -> BusError {
            BusError(name: "org.freedesktop.DBus.Error.AccessDenied", text: text)
        }
        static func isLocked(_ path: String) -> BusError {
            BusError(
                name: "org.freedesktop.Secret.Error.IsLocked",
                text: "\(path) is locked: the keychain is locked (Unlock it, or lactl keychain unlock)")
        }
    }

    /// What an object path names.
    enum Object: Equatable {
        case service
        case collection(String)
        case item(collection: String, id: String)
        case session(String)
        case prompt(String)
    }

    func object(at path: String) -> Object? {
        if path == Self.root { return .service }
        if path.hasPrefix(Self.root + "/session/") { return sessions[path] == nil ? nil : .session(path) }
        if path.hasPrefix(Self.root + "/prompt/") { return prompts.owner(of: path) == nil ? nil : .prompt(path) }
        var rest: [Substring]
        if path.hasPrefix(Self.root + "/collection/") {
            rest = path.dropFirst((Self.root + "/collection/").count).split(
                separator: "/", omittingEmptySubsequences: false)
        } else if path.hasPrefix(Self.root + "/aliases/") {
            rest = path.dropFirst((Self.root + "/aliases/").count).split(
                separator: "/", omittingEmptySubsequences: false)
            guard let alias = rest.first, let name = store.aliases()[String(alias)] else { return nil }
            rest[0] = Substring(name)
        } else {
            return nil
        }
        guard let name = rest.first.map(String.init), isCollection(name) else { return nil }
        if rest.count == 1 { return .collection(name) }
        guard rest.count == 2, KeychainSecrets.isItemName(String(rest[1])) else { return nil }
        return .item(collection: name, id: String(rest[1]))
    }

    /// Whether a collection is named `name`.
    private func isCollection(_ name: String) -> Bool {
        name == Self.persisted || name == Self.inMemory || collections().contains { $0.name == name }
    }

    /// The persisted collections (``KeychainSecrets/collections()``), their names also kept for the lock's signals.
    private func collections() -> [CollectionEntry] {
        let found = store.collections()
        persistedNames.set(found.map(\.name))
        return found
    }

    static func path(of collection: String) -> String { root + "/collection/" + collection }
    static func path(of collection: String, item id: String) -> String { path(of: collection) + "/" + id }

    /// The members answered on GDBus's worker thread when they can be (``answerOnWorker(_:)``): the reads a client
    /// repeats. Anything that changes the store, opens a session or may wait for the user goes to the serving thread.
    static let workerMembers: Set<String> = [
        "Get", "GetAll", "SearchItems", "GetSecret", "GetSecrets", "ReadAlias", "Introspect", "Ping",
    ]

    /// Whether the call being answered may not ask the user: on the worker thread (the serving thread answers it
    /// instead), and at a secret read's first try on the serving thread (one that would ask moves to a thread of its
    /// own, ``askInTheBackground``).
    private var askingNobody = false

    /// On GDBus's worker thread, while the serving thread waits with nothing queued (so never beside it): answers
    /// `call` when it is a read of a known connection that needs no one asked, saving the two thread hand-offs of the
    /// queue; false leaves it to the serving thread, untouched.
    fileprivate func answerOnWorker(_ call: OpaquePointer) -> Bool {
        guard let member = g_dbus_message_get_member(call).map({ String(cString: $0) }),
            Self.workerMembers.contains(member), store.client != nil,
            !asking.isBusy(g_dbus_message_get_sender(call).map { String(cString: $0) } ?? "")
        else { return false }
        askingNobody = true
        defer { askingNobody = false }
        return store.withWatchedClient { handle(call, onWorker: true) }
    }

    /// Answers `call`; false only `onWorker`, when it must be answered on the serving thread (nothing was sent).
    @discardableResult
    private func handle(_ call: OpaquePointer, onWorker: Bool = false) -> Bool {
        let member = g_dbus_message_get_member(call).map { String(cString: $0) } ?? ""
        let interface = g_dbus_message_get_interface(call).map { String(cString: $0) } ?? ""
        let path = g_dbus_message_get_path(call).map { String(cString: $0) } ?? ""
        let sender = g_dbus_message_get_sender(call).map { String(cString: $0) } ?? ""
        let arguments: [BusValue]
        if let body = g_dbus_message_get_body(call) {
            guard let value = BusValue(body), let members = value.members else {
                fail(call, .invalidArguments("arguments of a type the Secret Service never takes"))
                return true
            }
            arguments = members
        } else {
            arguments = []
        }
        // Every keychain request made for this call is made on behalf of the calling program (its items trust it;
        // another program's read asks the user), identified by localauthd, not by the provider. A connection not
        // seen before is looked up on the bus, which the worker thread cannot wait for.
        guard let subject = onWorker ? knownSubject(of: sender) : subject(of: sender) else {
            if onWorker { return false }
            fail(
                call,
                .accessDenied(
                    "which program \(sender) is cannot be told (the bus gives no process, it runs another program"
                        + " than when it first called, or too many clients are connected)"))
            return true
        }
        // A secret read tries first without asking anyone: one that would ask waits on a thread of its own.
        let firstTry = !onWorker && Self.secretReads.contains(member)
        if firstTry { askingNobody = true }
        defer { if firstTry { askingNobody = false } }
        do {
            let reply = try KeychainSubject.$current.withValue(subject) {
                try answer(interface: interface, member: member, path: path, sender: sender, arguments)
            }
            let body = reply.map { BusValue.tuple($0).gvariant() }
            la_secret_bus_reply(bus, call, body)
        } catch let error as KeychainSecrets.Failure where onWorker && error.isInteractionNotAllowed {
            // Someone would have to be asked (or the keychain is locked): the serving thread answers.
            return false
        } catch let error as BusError {
            fail(call, error)
        } catch let error as KeychainSecrets.Failure
            where error.isInteractionNotAllowed && isPersisted(object(at: path))
            && (try? store.isLocked()) == true
        {
            fail(call, .isLocked(path))
        } catch let error as KeychainSecrets.Failure where firstTry && error.isInteractionNotAllowed {
            askingNobody = false
            askInTheBackground(call, member: member, path: path, sender: sender, subject: subject, arguments)
        } catch let error as KeychainSecrets.Failure where error.isRefusal {
            fail(call, .accessDenied(error.description))
        } catch let error as KeychainSecrets.Failure {
            fail(call, BusError(name: "org.freedesktop.DBus.Error.Failed", text: error.description))
        } catch {
            fail(call, BusError(name: "org.freedesktop.DBus.Error.Failed", text: "\(error)"))
        }
        return true
    }

    /// The process behind connection `sender` when it was seen before and still runs the file it ran then; nil
    /// otherwise (the serving thread then looks it up, or refuses it).
    private func knownSubject(of sender: String) -> ProcessReference? {
        guard let known = subjects[sender], ProcessReference.ExecutableFile(runBy: known.pid) == known.executable
        else { return nil }
        return known
    }

    /// The process behind connection `sender`, as first seen (with the file it ran); nil when the bus cannot say,
    /// when that process runs another file now (it exec'd another program since: the connection may now be a
    /// child's), or when too many connections are remembered. localauthd checks the file again when it identifies
    /// the process.
    private func subject(of sender: String) -> ProcessReference? {
        if let known = subjects[sender] {
            return ProcessReference.ExecutableFile(runBy: known.pid) == known.executable ? known : nil
        }
        let pid = Int32(bitPattern: la_secret_bus_sender_pid(bus, sender))
        guard pid > 0, let found = ProcessReference.runningWithExecutable(pid) else { return nil }
        if subjects.count >= Self.subjectLimit {
            // Only connections that are gone are forgotten: a live one seen again would be taken as whatever its
            // process runs by then.
            subjects = subjects.filter { la_secret_bus_name_has_owner(bus, $0.key) != 0 }
            guard subjects.count < Self.subjectLimit else { return nil }
        }
        subjects[sender] = found
        return found
    }

    /// The file the calling program (``KeychainSubject/current``) ran when it first called, for the `session`
    /// collection's owners.
    private static func callingExecutable() -> ProcessReference.ExecutableFile? {
        KeychainSubject.current?.executable
    }

    /// Refuses a `session` item to any program but the one that made it (no one is asked: the item is in memory,
    /// where no trusted-application list is kept).
    private func requireOwner(_ id: String) throws {
        guard let owner = memoryOwners[id], let caller = Self.callingExecutable(), owner == caller else {
            throw BusError.accessDenied("the session collection's item \(id) belongs to another program")
        }
    }

    private func fail(_ call: OpaquePointer, _ error: BusError) {
        la_secret_bus_fail(bus, call, error.name, error.text)
    }

    /// The reply's members (nil: none) to `member` of `interface` on `path`.
    private func answer(interface: String, member: String, path: String, sender: String, _ arguments: [BusValue])
        throws -> [BusValue]?
    {
        switch (interface, member) {
        case ("org.freedesktop.DBus.Peer", "Ping"): return nil
        case ("org.freedesktop.DBus.Introspectable", "Introspect"):
            return [.string(try introspection(of: path))]
        case (Self.propertiesInterface, _):
            guard let target = object(at: path) else { throw BusError.noSuchObject(path) }
            return try properties(member, of: target, at: path, arguments)
        default: break
        }
        guard let target = object(at: path) else { throw BusError.noSuchObject(path) }
        switch (target, interface, member) {
        case (.service, Self.serviceInterface, "OpenSession"), (.service, "", "OpenSession"):
            return try openSession(arguments, sender: sender)
        case (.service, Self.serviceInterface, "SearchItems"), (.service, "", "SearchItems"):
            let wanted = try argument(arguments, 0, "a{ss}").stringMap!
            let found = try searchAll(wanted)
            return [.paths(found), .paths([])]
        case (.service, Self.serviceInterface, "Unlock"), (.service, "", "Unlock"):
            let objects = try argument(arguments, 0, "ao").members!.compactMap(\.string)
            return try unlock(objects, sender: sender)
        case (.service, Self.serviceInterface, "Lock"), (.service, "", "Lock"):
            // The login collection and its items lock with the keychain; the session collection never locks.
            let objects = try argument(arguments, 0, "ao").members!.compactMap(\.string)
            let persisted = objects.filter { isPersisted(self.object(at: $0)) }
            if !persisted.isEmpty { try store.lock() }
            return [.paths(persisted), .objectPath("/")]
        case (.service, Self.serviceInterface, "GetSecrets"), (.service, "", "GetSecrets"):
            let items = try argument(arguments, 0, "ao").members!.compactMap(\.string)
            let session = try transfer(try argument(arguments, 1, "o").string!, sender: sender)
            var keys: [BusValue] = []
            var values: [BusValue] = []
            for item in items {
                guard case .item(let collection, let id)? = object(at: item) else { continue }
                keys.append(.objectPath(item))
                values.append(try secretStruct(collection, id, session: session))
            }
            return [.dictionary(keyType: "o", valueType: "(oayays)", keys, values)]
        case (.service, Self.serviceInterface, "ReadAlias"), (.service, "", "ReadAlias"):
            let name = try argument(arguments, 0, "s").string!
            let named = store.aliases()[name] ?? (name == Self.persisted ? Self.persisted : nil)
            return [.objectPath(named.map { isCollection($0) ? Self.path(of: $0) : "/" } ?? "/")]
        case (.service, Self.serviceInterface, "SetAlias"), (.service, "", "SetAlias"):
            let name = try argument(arguments, 0, "s").string!
            let target = try argument(arguments, 1, "o").string!
            try Self.requireAliasName(name)
            if try store.isLocked() { throw BusError.isLocked(Self.root) }
            if target == "/" {
                try store.setAlias(name, to: nil)
            } else {
                guard case .collection(let collection)? = object(at: target) else {
                    throw BusError.noSuchObject(target)
                }
                // An alias is kept in the keychain: it names a collection that is kept there too (`default` pointed
                // at the session collection would lose every later program's secrets at the provider's exit).
                guard collection != Self.inMemory else {
                    throw BusError.notSupported("an alias names a persisted collection, not the session collection")
                }
                guard store.aliases().count < Self.aliasLimit || store.aliases()[name] != nil else {
                    throw BusError(
                        name: "org.freedesktop.DBus.Error.LimitsExceeded", text: "\(Self.aliasLimit) aliases are kept")
                }
                try store.setAlias(name, to: collection)
            }
            return nil
        case (.service, Self.serviceInterface, "CreateCollection"), (.service, "", "CreateCollection"):
            return try createCollection(arguments)
        case (.collection(let name), Self.collectionInterface, "SearchItems"),
            (.collection(let name), "", "SearchItems"):
            let wanted = try argument(arguments, 0, "a{ss}").stringMap!
            return [.paths(try search(name, wanted).map { Self.path(of: name, item: $0.id) })]
        case (.collection(let name), Self.collectionInterface, "CreateItem"), (.collection(let name), "", "CreateItem"):
            return try createItem(in: name, arguments, sender: sender)
        case (.collection(let name), Self.collectionInterface, "Delete"), (.collection(let name), "", "Delete"):
            guard name != Self.persisted, name != Self.inMemory else {
                throw BusError.notSupported("the login and session collections cannot be deleted")
            }
            if try store.isLocked() { throw BusError.isLocked(path) }
            try store.deleteCollection(name)
            emit(Self.root, Self.serviceInterface, "CollectionDeleted", [.objectPath(Self.path(of: name))])
            emitCollectionsChanged()
            return [.objectPath("/")]
        case (.item(let collection, let id), Self.itemInterface, "GetSecret"),
            (.item(let collection, let id), "", "GetSecret"):
            let session = try transfer(try argument(arguments, 0, "o").string!, sender: sender)
            return [try secretStruct(collection, id, session: session)]
        case (.item(let collection, let id), Self.itemInterface, "SetSecret"),
            (.item(let collection, let id), "", "SetSecret"):
            let (secret, contentType) = try openSecret(try argument(arguments, 0, "(oayays)"), sender: sender)
            try change(collection, id, contentType: contentType, secret: secret)
            return nil
        case (.item(let collection, let id), Self.itemInterface, "Delete"),
            (.item(let collection, let id), "", "Delete"):
            _ = try stored(collection, id)
            if collection == Self.inMemory {
                try requireOwner(id)
                memory[id] = nil
                memoryOwners[id] = nil
            } else {
                try store.delete(collection, id)
            }
            emit(Self.path(of: collection), Self.collectionInterface, "ItemDeleted", [.objectPath(path)])
            return [.objectPath("/")]
        case (.prompt(let prompt), Self.promptInterface, "Prompt"), (.prompt(let prompt), "", "Prompt"):
            _ = try argument(arguments, 0, "s")
            try startUnlock(prompt, sender: sender)
            return nil
        case (.prompt(let prompt), Self.promptInterface, "Dismiss"), (.prompt(let prompt), "", "Dismiss"):
            guard prompts.owner(of: prompt) == sender else { throw BusError.noSuchObject(prompt) }
            prompts.dismiss(prompt, signals: Signals(bus: bus))
            return nil
        case (.session(let session), Self.sessionInterface, "Close"), (.session(let session), "", "Close"):
            guard sessions[session]?.owner == sender else { throw BusError.noSuchObject(session) }
            sessions[session] = nil
            return nil
        default:
            throw BusError(
                name: "org.freedesktop.DBus.Error.UnknownMethod",
                text: "no method \(member) of \(interface.isEmpty ? "any interface" : interface) at \(path)")
        }
    }

    /// Argument `index`, which must be of D-Bus type `type`.
    private func argument(_ arguments: [BusValue], _ index: Int, _ type: String) throws -> BusValue {
        guard index < arguments.count, arguments[index].type == type else {
            throw BusError.invalidArguments("argument \(index + 1) must be of type \(type)")
        }
        return arguments[index]
    }

    /// The members that read secrets, and may ask the user.
    static let secretReads: Set<String> = ["GetSecret", "GetSecrets"]

    /// A secret read that asks the user: resolved here (the provider's state is this thread's), then read on a
    /// thread of its own, which answers the call; the connection's later calls wait behind it, every other
    /// connection is answered meanwhile.
    private func askInTheBackground(
        _ call: OpaquePointer, member: String, path: String, sender: String, subject: ProcessReference,
        _ arguments: [BusValue]
    ) {
        let session: (path: String, transfer: Transfer)
        var reads: [(path: String, collection: String, id: String)] = []
        // The session collection's secrets, read here (they never ask).
        var inMemory: [String: BusValue] = [:]
        do {
            if member == "GetSecret" {
                session = try transfer(try argument(arguments, 0, "o").string!, sender: sender)
                guard case .item(let collection, let id)? = object(at: path) else { throw BusError.noSuchObject(path) }
                reads = [(path, collection, id)]
            } else {
                let items = try argument(arguments, 0, "ao").members!.compactMap(\.string)
                session = try transfer(try argument(arguments, 1, "o").string!, sender: sender)
                for item in items {
                    guard case .item(let collection, let id)? = object(at: item) else { continue }
                    if collection == Self.inMemory {
                        inMemory[item] = try KeychainSubject.$current.withValue(subject) {
                            try secretStruct(collection, id, session: session)
                        }
                    } else {
                        reads.append((item, collection, id))
                    }
                }
            }
        } catch let error as BusError {
            return fail(call, error)
        } catch {
            return fail(call, BusError(name: "org.freedesktop.DBus.Error.Failed", text: "\(error)"))
        }
        guard asking.begin(sender) else {
            return fail(call, .accessDenied("\(AskingConnections.limit) reads already wait for the user"))
        }
        g_object_ref(UnsafeMutableRawPointer(call))
        let read = BackgroundRead(
            owner: self, bus: bus, call: call, store: store, subject: subject, session: session, reads: reads,
            inMemory: inMemory,
            single: member == "GetSecret", asking: asking, sender: sender)
        let thread = Thread { read.run() }
        thread.name = "secret read"
        thread.start()
    }

    /// A secret read that waits for the user, on its thread: reads each item (asking as the keychain needs),
    /// answers the call, and tells the serving thread it finished.
    private final class BackgroundRead: @unchecked Sendable {
        // @unchecked: made on the serving thread and then used by the read's thread alone. The call holds a
        // reference taken for it; the bus lives as long as the provider; of `store` only the keychain reads are used,
        // which any thread may make.
        /// Kept alive while the read waits: its bus must outlive the answer.
        let owner: SecretServiceProvider
        let bus: OpaquePointer
        let call: OpaquePointer
        let store: KeychainSecrets
        let subject: ProcessReference
        let session: (path: String, transfer: Transfer)
        let reads: [(path: String, collection: String, id: String)]
        let inMemory: [String: BusValue]
        let single: Bool
        let asking: AskingConnections
        let sender: String

        init(
            owner: SecretServiceProvider, bus: OpaquePointer, call: OpaquePointer, store: KeychainSecrets,
            subject: ProcessReference,
            session: (path: String, transfer: Transfer), reads: [(path: String, collection: String, id: String)],
            inMemory: [String: BusValue], single: Bool, asking: AskingConnections, sender: String
        ) {
            self.owner = owner
            self.bus = bus
            self.call = call
            self.store = store
            self.subject = subject
            self.session = session
            self.reads = reads
            self.inMemory = inMemory
            self.single = single
            self.asking = asking
            self.sender = sender
        }

        func run() {
            defer {
                g_object_unref(UnsafeMutableRawPointer(call))
                asking.finish(sender)
                la_secret_bus_wake(bus)
            }
            do {
                var values = inMemory
                let read: Result<Void, any Error> = store.withWatchedClient {
                    Result {
                        try KeychainSubject.$current.withValue(subject) {
                            for read in reads {
                                guard let found = try store.itemWithSecret(read.collection, read.id) else {
                                    throw BusError.noSuchObject(read.path)
                                }
                                values[read.path] = try SecretServiceProvider.secretStruct(
                                    found.item, found.secret, session: session)
                            }
                        }
                    }
                }
                try read.get()
                let reply: [BusValue]
                if single, let value = values.values.first {
                    reply = [value]
                } else {
                    let paths = values.keys.sorted()
                    reply = [
                        .dictionary(
                            keyType: "o", valueType: "(oayays)", paths.map { .objectPath($0) },
                            paths.map { values[$0]! })
                    ]
                }
                la_secret_bus_reply(bus, call, BusValue.tuple(reply).gvariant())
            } catch let error as BusError {
                la_secret_bus_fail(bus, call, error.name, error.text)
            } catch let error as KeychainSecrets.Failure where error.isRefusal {
                let denied = BusError.accessDenied(error.description)
                la_secret_bus_fail(bus, call, denied.name, denied.text)
            } catch {
                la_secret_bus_fail(bus, call, "org.freedesktop.DBus.Error.Failed", "\(error)")
            }
        }
    }

    // MARK: Locking

    /// Whether `object` locks with the keychain: every collection but `session`, and their items.
    private func isPersisted(_ object: Object?) -> Bool {
        switch object {
        case .collection(let name)?, .item(let name, _)?: name != Self.inMemory
        default: false
        }
    }

    /// `CreateCollection(properties, alias)`: the collection an alias already names, else a new persisted one
    /// labelled as asked (and aliased so). No prompt: the keychain it goes in is unlocked, or the call fails.
    private func createCollection(_ arguments: [BusValue]) throws -> [BusValue] {
        let properties = try argument(arguments, 0, "a{sv}").properties ?? [:]
        let alias = try argument(arguments, 1, "s").string!
        if alias == Self.persisted { return [.objectPath(Self.path(of: Self.persisted)), .objectPath("/")] }
        if !alias.isEmpty {
            try Self.requireAliasName(alias)
            if let named = store.aliases()[alias], isCollection(named) {
                return [.objectPath(Self.path(of: named)), .objectPath("/")]
            }
        }
        var label = ""
        if let given = properties[Self.collectionInterface + ".Label"] {
            guard let text = given.string, text.utf8.count <= 4096 else {
                throw BusError.invalidArguments("Label is a string of at most 4096 bytes")
            }
            label = text
        }
        if try store.isLocked() { throw BusError.isLocked(Self.root) }
        guard collections().count < Self.collectionLimit else {
            throw BusError(
                name: "org.freedesktop.DBus.Error.LimitsExceeded", text: "\(Self.collectionLimit) collections are kept")
        }
        let name = try store.createCollection(label: label)
        if !alias.isEmpty { try store.setAlias(alias, to: name) }
        let path = Self.path(of: name)
        emit(Self.root, Self.serviceInterface, "CollectionCreated", [.objectPath(path)])
        emitCollectionsChanged()
        return [.objectPath(path), .objectPath("/")]
    }

    /// The most persisted collections kept.
    static let collectionLimit = 256
    /// The most aliases kept (`default` included).
    static let aliasLimit = 64

    /// An alias name: letters, digits and `_`, and not a collection's own name (`login`, `session`), which
    /// `ReadAlias` answers itself.
    private static func requireAliasName(_ name: String) throws {
        guard KeychainSecrets.isItemName(name), name != persisted, name != inMemory else {
            throw BusError.invalidArguments("an alias is made of letters, digits and _, and is not login or session")
        }
    }

    /// The service's `Collections` changed.
    private func emitCollectionsChanged() {
        emit(
            Self.root, Self.propertiesInterface, "PropertiesChanged",
            [
                .string(Self.serviceInterface),
                .dictionary(
                    keyType: "s", valueType: "v", [.string("Collections")], [.variant(.paths(collectionPaths()))]),
                .array(elementType: "s", []),
            ])
    }

    /// Every collection's path: the persisted ones, then `session`.
    private func collectionPaths() -> [String] {
        (collections().map(\.name) + [Self.inMemory]).map { Self.path(of: $0) }
    }

    /// `Unlock`: the objects unlocked now, and a prompt for the rest (the login collection's, while the keychain is
    /// locked), which unlocks the keychain when the client calls it: the user answers through the prompt agent.
    private func unlock(_ objects: [String], sender: String) throws -> [BusValue] {
        let known = objects.filter { object(at: $0) != nil }
        let waiting = known.filter { isPersisted(object(at: $0)) }
        guard !waiting.isEmpty, try store.isLocked() else { return [.paths(known), .objectPath("/")] }
        guard let prompt = prompts.add(owner: sender, objects: waiting, under: Self.root + "/prompt/") else {
            throw BusError(name: "org.freedesktop.DBus.Error.LimitsExceeded", text: "too many prompts are waiting")
        }
        return [.paths(known.filter { !waiting.contains($0) }), .objectPath(prompt)]
    }

    /// `Prompt` of an unlock prompt: asks for the passcode through localauthd's prompt agent, off this thread;
    /// `Completed` tells the outcome (dismissed when no one could be asked, or the user said no).
    private func startUnlock(_ prompt: String, sender: String) throws {
        guard prompts.owner(of: prompt) == sender else { throw BusError.noSuchObject(prompt) }
        guard let client = store.client else {
            throw BusError(name: "org.freedesktop.DBus.Error.Failed", text: "the keychain cannot be reached")
        }
        let options = EvaluationOptions(
            prompt: EvaluationPrompt(reason: "Unlock the keychain (asked through the Secret Service)"))
        let changed = store.changeNotifier()
        prompts.start(prompt, signals: Signals(bus: bus)) {
            do {
                _ = try await client.send(.unlockWithPasscode(options), presenter: nil)
                // Before Completed: a client that reads Locked at once is answered from the keychain, not from what
                // was kept while locked.
                changed()
                return true
            } catch {
                return false
            }
        }
    }

    // MARK: Sessions and secrets

    private func openSession(_ arguments: [BusValue], sender: String) throws -> [BusValue] {
        let algorithm = try argument(arguments, 0, "s").string!
        guard case .variant(let input) = try argument(arguments, 1, "v") else { throw BusError.invalidArguments("") }
        let transfer: Transfer
        let output: BusValue
        switch algorithm {
        case "plain":
            transfer = .plain
            output = .string("")
        case "dh-ietf1024-sha256-aes128-cbc-pkcs7":
            guard case .bytes(let peer) = input else {
                throw BusError.invalidArguments("the dh-ietf1024 algorithm's input is the client's public key (ay)")
            }
            do {
                let session = try SecretServiceSession(peerPublicKey: Data(peer))
                transfer = .encrypted(session)
                output = .bytes(Array(session.publicKey))
            } catch {
                throw BusError.invalidArguments("the client's public key is not usable: \(error)")
            }
        default:
            throw BusError.notSupported(
                "the algorithm \(algorithm) is not offered (plain, dh-ietf1024-sha256-aes128-cbc-pkcs7)")
        }
        // Clients (Python's keyring, for one) open a session per call and never close it: past the limit the
        // oldest session goes, rather than every client being refused from then on.
        if sessions.count >= Self.sessionLimit, let oldest = sessions.min(by: { $0.value.number < $1.value.number }) {
            sessions[oldest.key] = nil
        }
        let path = Self.root + "/session/s\(nextSession)"
        nextSession += 1
        sessions[path] = Session(owner: sender, transfer: transfer, number: nextSession - 1)
        return [.variant(output), .objectPath(path)]
    }

    /// The session at `path`, which `sender` must have opened.
    private func transfer(_ path: String, sender: String) throws -> (path: String, transfer: Transfer) {
        guard let session = sessions[path], session.owner == sender else {
            throw BusError(
                name: "org.freedesktop.Secret.Error.NoSession", text: "no session \(path) of this connection")
        }
        return (path, session.transfer)
    }

    /// The secret of an item as the struct `(oayays)` the session carries.
    private func secretStruct(_ collection: String, _ id: String, session: (path: String, transfer: Transfer)) throws
        -> BusValue
    {
        let (item, secret) = try storedWithSecret(collection, id)
        return try Self.secretStruct(item, secret, session: session)
    }

    /// `secret` of `item` as the struct `(oayays)` the session carries.
    private static func secretStruct(
        _ item: StoredSecretItem, _ secret: SecureBytes, session: (path: String, transfer: Transfer)
    ) throws -> BusValue {
        let parameters: [UInt8]
        let value: [UInt8]
        switch session.transfer {
        case .plain:
            parameters = []
            value = secret.withUnsafeBytes { Array($0) }
        case .encrypted(let keys):
            let sealed = try keys.encrypt(secret)
            parameters = Array(sealed.parameters)
            value = Array(sealed.value)
        }
        return .tuple([.objectPath(session.path), .bytes(parameters), .bytes(value), .string(item.contentType)])
    }

    /// The secret and content type a client sent in `(oayays)`.
    private func openSecret(_ value: BusValue, sender: String) throws -> (SecureBytes, String) {
        guard let parts = value.members, parts.count == 4, let path = parts[0].string,
            case .bytes(let parameters) = parts[1], case .bytes(let sealed) = parts[2],
            let contentType = parts[3].string
        else { throw BusError.invalidArguments("a secret is (oayays)") }
        let session = try transfer(path, sender: sender)
        switch session.transfer {
        case .plain:
            return (SecureBytes(sealed), contentType)
        case .encrypted(let keys):
            do {
                return (try keys.decrypt(Data(sealed), parameters: Data(parameters)), contentType)
            } catch {
                throw BusError.invalidArguments("the secret does not decrypt under the session's key")
            }
        }
    }

    // MARK: Items

    private func allItems(_ collection: String) throws -> [StoredSecretItem] {
        collection == Self.inMemory ? memory.values.map(\.item).sorted { $0.id < $1.id } : try store.items(collection)
    }

    private func stored(_ collection: String, _ id: String) throws -> StoredSecretItem {
        let found = collection == Self.inMemory ? memory[id]?.item : try store.item(collection, id)
        guard let found else { throw BusError.noSuchObject(Self.path(of: collection, item: id)) }
        return found
    }

    private func storedWithSecret(_ collection: String, _ id: String) throws -> (StoredSecretItem, SecureBytes) {
        if collection == Self.inMemory, let entry = memory[id] {
            try requireOwner(id)
            return (entry.item, entry.secret)
        }
        guard collection != Self.inMemory,
            let found = try store.itemWithSecret(collection, id, mayAsk: !askingNobody)
        else { throw BusError.noSuchObject(Self.path(of: collection, item: id)) }
        return (found.item, found.secret)
    }

    private func search(_ collection: String, _ wanted: [String: String]) throws -> [StoredSecretItem] {
        func matching(_ items: [StoredSecretItem]) -> [StoredSecretItem] {
            items.filter { item in wanted.allSatisfy { item.attributes[$0.key] == $0.value } }
        }
        // Locked, the items' attributes are sealed under the keychain's keys: nothing can be found.
        if collection != Self.inMemory, try store.isLocked() { return [] }
        let found = matching(try allItems(collection))
        // Through localauthd the kept listing learns of another program's new item when its event arrives: a
        // search that finds nothing asks the keychain itself.
        guard found.isEmpty, collection != Self.inMemory, store.mayLag(collection) else { return found }
        return matching(try store.items(collection, fresh: true))
    }

    private func searchAll(_ wanted: [String: String]) throws -> [String] {
        try (collections().map(\.name) + [Self.inMemory]).flatMap { name in
            try search(name, wanted).map { Self.path(of: name, item: $0.id) }
        }
    }

    private func createItem(in collection: String, _ arguments: [BusValue], sender: String) throws -> [BusValue] {
        let properties = try argument(arguments, 0, "a{sv}").properties ?? [:]
        let (secret, contentType) = try openSecret(try argument(arguments, 1, "(oayays)"), sender: sender)
        let replace = try argument(arguments, 2, "b") == .boolean(true)
        let label = properties[Self.itemInterface + ".Label"]?.string ?? ""
        var attributes: [String: String] = [:]
        if let given = properties[Self.itemInterface + ".Attributes"] {
            guard let map = given.stringMap else { throw BusError.invalidArguments("Attributes is a{ss}") }
            attributes = map
        }
        guard attributes.count <= 256,
            attributes.allSatisfy({ $0.key.utf8.count <= 1024 && $0.value.utf8.count <= 65536 }),
            label.utf8.count <= 65536
        else { throw BusError.invalidArguments("too many or too long attributes") }
        // Asked of the keychain itself: an item another program stored a moment ago is replaced, not doubled.
        let present = collection == Self.inMemory ? try allItems(collection) : try store.items(collection, fresh: true)
        if replace, let existing = present.first(where: { $0.attributes == attributes }) {
            try change(collection, existing.id, label: label, contentType: contentType, secret: secret)
            return [.objectPath(Self.path(of: collection, item: existing.id)), .objectPath("/")]
        }
        let id: String
        if collection == Self.inMemory {
            guard let owner = Self.callingExecutable() else {
                throw BusError.accessDenied("the calling program's executable cannot be read")
            }
            id = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let now = UInt64(Date().timeIntervalSince1970)
            memory[id] = (
                StoredSecretItem(
                    id: id, label: label, attributes: attributes, contentType: contentType, created: now, modified: now),
                secret
            )
            memoryOwners[id] = owner
        } else {
            id = try store.add(
                collection, label: label, attributes: attributes, contentType: contentType, secret: secret)
        }
        let path = Self.path(of: collection, item: id)
        emit(Self.path(of: collection), Self.collectionInterface, "ItemCreated", [.objectPath(path)])
        return [.objectPath(path), .objectPath("/")]
    }

    private func change(
        _ collection: String, _ id: String, label: String? = nil, attributes: [String: String]? = nil,
        contentType: String? = nil, secret: SecureBytes? = nil
    ) throws {
        if collection == Self.inMemory {
            guard var entry = memory[id] else { throw BusError.noSuchObject(Self.path(of: collection, item: id)) }
            try requireOwner(id)
            if let label { entry.item.label = label }
            if let attributes { entry.item.attributes = attributes }
            if let contentType { entry.item.contentType = contentType }
            if let secret { entry.secret = secret }
            entry.item.modified = UInt64(Date().timeIntervalSince1970)
            memory[id] = entry
        } else {
            try store.update(
                collection, id, label: label, attributes: attributes, contentType: contentType, secret: secret)
        }
        emit(
            Self.path(of: collection), Self.collectionInterface, "ItemChanged",
            [.objectPath(Self.path(of: collection, item: id))])
    }

    private func emit(_ path: String, _ interface: String, _ member: String, _ body: [BusValue]) {
        Signals(bus: bus).emit(path, interface, member, body)
    }

    // MARK: Properties and introspection

    private func propertyValues(of object: Object) throws -> (interface: String, values: [String: BusValue]) {
        switch object {
        case .service:
            return (Self.serviceInterface, ["Collections": .paths(collectionPaths())])
        case .collection(let name):
            let locked = name == Self.inMemory ? false : try store.isLocked()
            let items = locked ? [] : try allItems(name)
            let entry = name == Self.inMemory ? nil : collections().first { $0.name == name }
            let created = entry.map(\.created).flatMap { $0 == 0 ? nil : $0 } ?? items.map(\.created).min() ?? 0
            return (
                Self.collectionInterface,
                [
                    "Items": .paths(items.map { Self.path(of: name, item: $0.id) }),
                    "Label": .string(entry?.label ?? "Session"), "Locked": .boolean(locked),
                    "Created": .uint64(created),
                    "Modified": .uint64(max(entry?.modified ?? 0, items.map(\.modified).max() ?? 0)),
                ]
            )
        case .item(let collection, let id):
            // Locked, whether the item exists cannot be told; Locked is all it shows.
            if collection != Self.inMemory, try store.isLocked() {
                return (Self.itemInterface, ["Locked": .boolean(true)])
            }
            let item = try stored(collection, id)
            return (
                Self.itemInterface,
                [
                    "Locked": .boolean(false), "Attributes": .stringMap(item.attributes), "Label": .string(item.label),
                    "Created": .uint64(item.created), "Modified": .uint64(item.modified),
                ]
            )
        case .session:
            return (Self.sessionInterface, [:])
        case .prompt:
            return (Self.promptInterface, [:])
        }
    }

    private func properties(_ member: String, of object: Object, at path: String, _ arguments: [BusValue]) throws
        -> [BusValue]?
    {
        let (interface, values) = try propertyValues(of: object)
        let asked = try argument(arguments, 0, "s").string!
        guard asked.isEmpty || asked == interface else {
            throw BusError.invalidArguments("\(path) has no interface \(asked)")
        }
        switch member {
        case "Get":
            let name = try argument(arguments, 1, "s").string!
            guard let value = values[name] else {
                if case .item = object, values["Locked"] == .boolean(true) { throw BusError.isLocked(path) }
                throw BusError.invalidArguments("no property \(name)")
            }
            return [.variant(value)]
        case "GetAll":
            let keys = values.keys.sorted()
            return [
                .dictionary(keyType: "s", valueType: "v", keys.map { .string($0) }, keys.map { .variant(values[$0]!) })
            ]
        case "Set":
            let name = try argument(arguments, 1, "s").string!
            guard case .variant(let value) = try argument(arguments, 2, "v") else {
                throw BusError.invalidArguments("")
            }
            if case .collection(let collection) = object, collection != Self.inMemory, name == "Label" {
                guard let label = value.string, label.utf8.count <= 4096 else {
                    throw BusError.invalidArguments("Label is a string of at most 4096 bytes")
                }
                if try store.isLocked() { throw BusError.isLocked(path) }
                try store.setLabel(ofCollection: collection, to: label)
                emit(
                    path, Self.propertiesInterface, "PropertiesChanged",
                    [
                        .string(Self.collectionInterface),
                        .dictionary(keyType: "s", valueType: "v", [.string(name)], [.variant(value)]),
                        .array(elementType: "s", []),
                    ])
                emit(Self.root, Self.serviceInterface, "CollectionChanged", [.objectPath(path)])
                return nil
            }
            guard case .item(let collection, let id) = object else {
                throw BusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", text: "\(name) cannot be set here")
            }
            switch name {
            case "Label":
                guard let label = value.string else { throw BusError.invalidArguments("Label is a string") }
                try change(collection, id, label: label)
            case "Attributes":
                guard let map = value.stringMap else { throw BusError.invalidArguments("Attributes is a{ss}") }
                try change(collection, id, attributes: map)
            default:
                throw BusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", text: "\(name) cannot be set")
            }
            emit(
                path, Self.propertiesInterface, "PropertiesChanged",
                [
                    .string(Self.itemInterface),
                    .dictionary(keyType: "s", valueType: "v", [.string(name)], [.variant(value)]),
                    .array(elementType: "s", []),
                ])
            return nil
        default:
            throw BusError(name: "org.freedesktop.DBus.Error.UnknownMethod", text: "no method \(member) of Properties")
        }
    }

    private func introspection(of path: String) throws -> String {
        let standard = """
            <interface name="org.freedesktop.DBus.Properties"><method name="Get"><arg type="s" direction="in"/>\
            <arg type="s" direction="in"/><arg type="v" direction="out"/></method><method name="GetAll">\
            <arg type="s" direction="in"/><arg type="a{sv}" direction="out"/></method><method name="Set">\
            <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="in"/></method>\
            <signal name="PropertiesChanged"><arg type="s"/><arg type="a{sv}"/><arg type="as"/></signal></interface>\
            <interface name="org.freedesktop.DBus.Introspectable"><method name="Introspect">\
            <arg type="s" direction="out"/></method></interface>
            """
        var body = ""
        var children: [String] = []
        switch object(at: path) {
        case .service?:
            body = SecretServiceIntrospection.service
            children = ["collection", "session"]
        case .collection(let name)?:
            body = SecretServiceIntrospection.collection
            children = try allItems(name).map(\.id)
        case .item?: body = SecretServiceIntrospection.item
        case .session?: body = SecretServiceIntrospection.session
        case .prompt?: body = SecretServiceIntrospection.prompt
        case nil:
            if path == Self.root + "/collection" {
                children = collections().map(\.name) + [Self.inMemory]
            } else if path == "/" || path == "/org" || path == "/org/freedesktop" {
                children = [path == "/" ? "org" : path == "/org" ? "freedesktop" : "secrets"]
            } else if path == Self.root + "/session" {
                children = sessions.keys.filter { sessions[$0]?.owner != nil }.map {
                    String($0.split(separator: "/").last!)
                }
            } else {
                throw BusError.noSuchObject(path)
            }
        }
        let nodes = children.map { "<node name=\"\($0)\"/>" }.joined()
        return "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\" "
            + "\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<node>"
            + (body.isEmpty ? "" : body + standard) + nodes + "</node>\n"
    }
}
