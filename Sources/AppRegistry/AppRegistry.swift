import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The registered applications: every `*.conf` file under a directory (`<config-directory>/apps.d`), read in name
/// order. A file that does not parse, that another user than root or the reader could have written, or that names
/// a program an earlier file already names is left out, and why is in ``problems``; the other files still count.
package struct AppRegistry: Sendable {
    /// The registrations used, with the file each came from.
    package private(set) var registrations: [(file: String, registration: AppRegistration)]
    /// The files left out and why, for the log.
    package private(set) var problems: [RegistrationError]
    /// What the directory looked like when read (names, sizes, times), to tell whether it changed since.
    package let fingerprint: Fingerprint

    /// An empty registry: every program is unregistered.
    package init() {
        registrations = []
        problems = []
        fingerprint = Fingerprint(entries: [])
    }

    /// Reads `directory`; a missing directory is an empty registry.
    package init(directory: String) {
        fingerprint = Fingerprint(directory: directory)
        registrations = []
        problems = []
        var byPath: [String: String] = [:]
        var byDigest: [Data: String] = [:]
        var appGroupTeams: [String: (team: String, file: String)] = [:]
        for name in Self.fileNames(in: directory) {
            let path = directory + "/" + name
            let registration: AppRegistration
            do {
                registration = try Self.read(path, name: name)
            } catch {
                problems.append(error)
                continue
            }
            // Two files naming the same program would make who it is depend on the order: the later one is left out.
            if registration.digests.isEmpty, let executable = registration.executable, let earlier = byPath[executable]
            {
                problems.append(
                    RegistrationError(file: name, line: 0, message: "\(executable) is already registered by \(earlier)")
                )
                continue
            }
            if let clash = registration.digests.first(where: { byDigest[$0] != nil }) {
                problems.append(
                    RegistrationError(
                        file: name, line: 0,
                        message: "sha256 \(AppRegistration.hex(clash)) is already registered by \(byDigest[clash]!)"))
                continue
            }
            // An app group is one team's, as Apple's developer accounts register it: another team's claim is left out.
            if let taken = registration.applicationGroups.first(where: {
                appGroupTeams[$0].map { $0.team != registration.team } ?? false
            }) {
                let owner = appGroupTeams[taken]!
                problems.append(
                    RegistrationError(
                        file: name, line: 0,
                        message:
                            "the app group \(taken) belongs to team \(owner.team) (\(owner.file)), not to \(registration.team)"
                    ))
                continue
            }
            for group in registration.applicationGroups where appGroupTeams[group] == nil {
                appGroupTeams[group] = (registration.team, name)
            }
            if registration.digests.isEmpty, let executable = registration.executable { byPath[executable] = name }
            for digest in registration.digests { byDigest[digest] = name }
            registrations.append((name, registration))
        }
    }

    /// The registration of a program running `path` whose executable's digest `digest` gives (asked only when a
    /// registration names digests): one that names its digest first, else one that names its path alone.
    /// `isFile` tells whether a registered path names the program's very file as the daemon sees it (the daemon's
    /// mount namespace: a path can name another file in another one); a registration whose path is not the
    /// program's file does not name it.
    package func registration(
        path: String, isFile: (String) -> Bool = { _ in true }, digest: () -> Data?
    ) -> (file: String, registration: AppRegistration)? {
        var known: Data??
        func digestOnce() -> Data? {
            if let known { return known }
            let computed = digest()
            known = .some(computed)
            return computed
        }
        for byDigest in [true, false] {
            for entry in registrations where entry.registration.digests.isEmpty != byDigest {
                if entry.registration.matches(path: path, isFile: isFile, digest: digestOnce) { return entry }
            }
        }
        return nil
    }

    /// The file names read: `*.conf`, not hidden, in byte order.
    package static func fileNames(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".conf") && !$0.hasPrefix(".") }.sorted {
            Array($0.utf8).lexicographicallyPrecedes($1.utf8)
        }
    }

    /// Reads and parses one file, refusing one that is not a regular file, that belongs to another user than root
    /// and the reader, or that others than its owner may write: a registration grants access groups, so only who
    /// may grant them may write it.
    static func read(_ path: String, name: String) throws(RegistrationError) -> AppRegistration {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw RegistrationError(
                file: name, line: 0, message: "cannot be opened (\(String(cString: strerror(errno))))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw RegistrationError(file: name, line: 0, message: "is not a regular file")
        }
        guard info.st_uid == 0 || info.st_uid == geteuid() else {
            throw RegistrationError(file: name, line: 0, message: "belongs to uid \(info.st_uid), not to root")
        }
        guard info.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw RegistrationError(
                file: name, line: 0,
                message: "may be written by others than its owner (mode \(String(info.st_mode & 0o777, radix: 8)))")
        }
        guard info.st_size <= AppRegistration.maximumFileByteCount else {
            throw RegistrationError(
                file: name, line: 0, message: "is longer than \(AppRegistration.maximumFileByteCount) bytes")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes {
                Glibc.read(descriptor, $0.baseAddress! + count, $0.count - count)
            }
            if read < 0 && errno == EINTR { continue }
            guard read > 0 else { break }
            count += read
        }
        guard count <= AppRegistration.maximumFileByteCount else {
            throw RegistrationError(
                file: name, line: 0, message: "is longer than \(AppRegistration.maximumFileByteCount) bytes")
        }
        guard let text = String(validating: bytes[0..<count], as: UTF8.self) else {
            throw RegistrationError(file: name, line: 0, message: "is not UTF-8 text")
        }
        return try AppRegistration(parsing: text, file: name)
    }

    /// The directory's entries as `stat` gives them: a file edited in place, replaced, added or removed changes it.
    package struct Fingerprint: Sendable, Hashable {
        var entries: [[Int64]]

        init(entries: [[Int64]]) {
            self.entries = entries
        }

        package init(directory: String) {
            var entries: [[Int64]] = []
            for name in [""] + AppRegistry.fileNames(in: directory) {
                var info = stat()
                guard stat(name.isEmpty ? directory : directory + "/" + name, &info) == 0 else {
                    entries.append([-1])
                    continue
                }
                entries.append([
                    Int64(bitPattern: UInt64(info.st_ino)), Int64(info.st_size), Int64(info.st_mode),
                    Int64(info.st_uid),
                    Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                    Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec),
                ])
            }
            self.entries = entries
        }
    }
}
