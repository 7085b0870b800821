import Foundation
import TestSupport
import Testing

/// Issue 50: Yubico's python-fido2 (its `Fido2Client` and its `Fido2Server`, which verifies attestation, signatures
/// and the RP ID hash) against `lactl fido serve --udp`, each credential a persisted right on the virtual reader.
@Suite("lactl fido with python-fido2", .serialized, .virtualReaderLock(timeLimit: .seconds(600)))
struct FIDOAuthenticatorTests {
    static let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/FIDOClient/fido_udp.py").path

    /// The virtual environment's python, with python-fido2 (`scripts/fido-venv` makes it once).
    static func python() throws -> String {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/fido-venv")
        let made = try runCapturingOutput(script, [])
        guard made.status == 0, let path = made.output.split(separator: "\n").last.map(String.init) else {
            throw CocoaError(
                .executableLoad, userInfo: [NSLocalizedDescriptionKey: "scripts/fido-venv failed: \(made.output)"])
        }
        return path
    }

    /// `lactl fido serve --udp 127.0.0.1:0` (and `arguments`) on the world's store and reader; its address once it
    /// printed it.
    func serve(
        _ world: RightsWorld, arguments: [String] = []
    ) async throws -> (SpawnedProcess, address: String, log: String) {
        let log = world.directory + "/fido-\(UUID().uuidString).log"
        let server = try SpawnedProcess(
            try lactlExecutable().path, ["fido", "serve", "--udp", "127.0.0.1:0"] + arguments,
            environment: world.toolEnvironment(), log: log)
        var address: String?
        let started = await waitUntil(within: .seconds(60)) {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            address = text.split(separator: "\n").first { $0.hasPrefix("FIDO_UDP=") }.map { String($0.dropFirst(9)) }
            return address != nil || !server.isRunning
        }
        guard started, let address else {
            _ = server.stop(SIGKILL)
            throw CocoaError(
                .executableLoad,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "lactl fido serve did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")"
                ])
        }
        return (server, address, log)
    }

    /// A new directory in the world where the client keeps one relying party's registered credentials.
    func relyingParty(_ world: RightsWorld, _ name: String) throws -> String {
        let directory = world.directory + "/" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Runs the python-fido2 client `arguments` (with `scans` on the reader meanwhile, each once the reader's
    /// driver takes it); its JSON answer.
    func client(
        _ python: String, _ address: String, _ arguments: [String], world: RightsWorld, scans: [String] = [],
        log: String = ""
    ) async throws -> [String: Any] {
        let run = Task {
            try await runCapturingOutput(URL(fileURLWithPath: python), [Self.client, address] + arguments)
        }
        for scan in scans {
            do {
                try await world.socket.send(scan)
            } catch {
                let output = (try? await run.value)?.output ?? ""
                let served = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                Issue.record(
                    "the reader never took '\(scan)' (\(error)); python-fido2 \(arguments): \(output)\nlactl: \(served)"
                )
                return ["error": output]
            }
        }
        let (status, output) = try await run.value
        let line = output.split(separator: "\n").last.map(String.init) ?? ""
        let answer = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        return answer.isEmpty || (status != 0 && answer["error"] == nil) ? ["error": output] : answer
    }

    @Test func getInfoSaysWhatTheAuthenticatorIs() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        let (server, address, log) = try await serve(world)
        defer { _ = server.stop() }
        let info = try await client(python, address, ["info"], world: world)
        let versions = info["versions"] as? [String] ?? []
        let options = info["options"] as? [String: Bool] ?? [:]
        #expect(versions == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE"], "\(info)")
        #expect(info["aaguid"] as? String == "6c6163746c2d46498d4f2d6c6f63616c", "\(info)")
        #expect(options["rk"] == true && options["uv"] == true && options["plat"] == false, "\(info)")
        #expect(options["credentialMgmtPreview"] == true && options["pinUvAuthToken"] == nil, "\(info)")
        #expect(info["extensions"] as? [String] == ["credProtect", "hmac-secret"], "\(info)")
        // CTAPHID_INIT's capabilities: CBOR and WINK, and MSG (CTAP1/U2F) since NMSG is clear.
        let logText = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(info["capabilities"] as? Int == 0x05, "\(info)\n\(logText)")
        await world.close()
    }

    /// A server-side credential: registered after the finger, then two sign-ins with the allow list, each after
    /// the finger, the counter moving 1, 2; the library's server checks every signature.
    @Test func aCredentialRegistersAndSignsInAfterTheFinger() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let (server, address, log) = try await serve(world)
        defer { _ = server.stop() }
        let state = try relyingParty(world, "rp")
        let registered = try await client(
            python, address, ["register", state, "alice"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(registered["fmt"] as? String == "none", "\(registered)")
        let id = try #require(registered["registered"] as? String, "\(registered)")
        for expected in 1...2 {
            let signedIn = try await client(
                python, address, ["authenticate", state], world: world, scans: ["SCAN alice-1"])
            #expect(signedIn["authenticated"] as? String == id, "\(signedIn)")
            #expect(signedIn["counter"] as? Int == expected, "\(signedIn)")
        }
        let listed = try await runCapturingOutput(
            try lactlExecutable(), ["fido", "list"], environment: world.toolEnvironment())
        #expect(listed.output.contains(id) && listed.output.contains("example.test"), "\(listed.output)")
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        #expect(logText.contains("reader to example.test wants to sign in as alice"), "\(logText)")
        await world.close()
    }

    /// A passkey made with user verification signs in without an allow list and names its user; once another
    /// finger is enrolled it is never offered again (no credentials), while a credential made without user
    /// verification still signs in.
    @Test func aPasskeyMadeWithUserVerificationEndsWhenTheFingersChange() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        var (server, address, _) = try await serve(world)
        let passkeys = try relyingParty(world, "passkeys")
        let plain = try relyingParty(world, "plain")
        let made = try await client(
            python, address, ["register", passkeys, "alice", "--resident", "--uv"], world: world,
            scans: ["SCAN alice-1"])
        #expect(made["registered"] != nil, "\(made)")
        #expect(
            try await client(python, address, ["register", plain, "bob"], world: world, scans: ["SCAN alice-1"])[
                "registered"] != nil)
        let signedIn = try await client(
            python, address, ["authenticate", passkeys, "--discoverable", "--uv"], world: world,
            scans: ["SCAN alice-1"])
        #expect(signedIn["authenticated"] as? String == made["registered"] as? String, "\(signedIn)")
        #expect(signedIn["user"] as? String == "alice", "\(signedIn)")

        _ = server.stop()
        try await world.enrollForThisUser("alice-2", finger: .leftIndex)
        (server, address, _) = try await serve(world)
        defer { _ = server.stop() }
        let refused = try await client(
            python, address, ["authenticate", passkeys, "--discoverable", "--uv"], world: world)
        #expect((refused["error"] as? String)?.contains("NO_CREDENTIALS") == true, "\(refused)")
        let stillWorks = try await client(
            python, address, ["authenticate", plain], world: world, scans: ["SCAN alice-1"])
        #expect(stillWorks["authenticated"] != nil, "\(stillWorks)")
        await world.close()
    }

    /// A PIN (CTAP 2.1 ClientPIN, through python-fido2's `ClientPin`, both protocols): set, then used by the
    /// library's client instead of the finger to verify the user (the UV flag set, the finger still asked for the
    /// key's presence), changed, refused after three wrong guesses in a power cycle, counted across restarts, and
    /// blocked for good after eight; a reset within 10 s of the start, after the finger, removes it and the
    /// passkeys (one later is refused: ``ResetWindowTests``).
    @Test func aPINIsSetUsedAndBlockedAfterTheRetriesCTAPAllows() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        var (server, address, log) = try await serve(world)
        func restart() async throws {
            _ = server.stop()
            (server, address, log) = try await serve(world)
        }
        func error(_ answer: [String: Any]) -> String { answer["error"] as? String ?? "no error: \(answer)" }
        func pin(_ arguments: String...) async throws -> [String: Any] {
            try await client(python, address, arguments, world: world)
        }

        #expect((try await pin("info")["options"] as? [String: Bool])?["clientPin"] == false)
        #expect(try await pin("pin-set", "1234", "--protocol", "1")["ok"] as? Bool == true)
        let info = try await pin("info")
        #expect((info["options"] as? [String: Bool])?["clientPin"] == true, "\(info)")
        #expect(info["min_pin_length"] as? Int == 4 && info["pin_protocols"] as? [Int] == [2, 1], "\(info)")
        #expect(try await pin("pin-retries")["retries"] as? Int == 8)
        #expect(error(try await pin("pin-set", "5678")).contains("PIN_AUTH_INVALID"))

        // The library's client verifies the user by the PIN (protocol two); the finger gives the key's presence.
        let state = try relyingParty(world, "rp")
        let registered = try await client(
            python, address, ["register", state, "alice", "--uv", "--pin", "1234"], world: world,
            scans: ["SCAN alice-1"], log: log)
        let userVerified = 0x04
        #expect((registered["flags"] as? Int ?? 0) & userVerified != 0, "\(registered)")
        let signedIn = try await client(
            python, address, ["authenticate", state, "--uv", "--pin", "1234"], world: world, scans: ["SCAN alice-1"])
        #expect(signedIn["authenticated"] as? String == registered["registered"] as? String, "\(signedIn)")
        #expect((signedIn["flags"] as? Int ?? 0) & userVerified != 0, "\(signedIn)")
        // One PIN entry verifies the user once: a token that served an assertion serves no second one.
        let twice = try await client(
            python, address, ["token-twice", state, "1234"], world: world, scans: ["SCAN alice-1"], log: log)
        let answers = twice["answers"] as? [[String: Any]] ?? []
        #expect(answers.count == 2, "\(twice)")
        #expect((answers.first?["flags"] as? Int ?? 0) & userVerified != 0, "\(twice)")
        #expect(answers.last?["error"] as? String == "PIN_AUTH_INVALID", "\(twice)")
        // Once a PIN is set, a passkey is not made without verifying the user: the authenticator answers
        // PUAT_REQUIRED to a request without verification, and the library asks again with it (the finger here).
        let other = try relyingParty(world, "other-rp")
        let passkey = try await client(
            python, address, ["register", other, "bob", "--resident"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect((passkey["flags"] as? Int ?? 0) & userVerified != 0, "\(passkey)")

        // Three wrong guesses end this power cycle's guessing, even the right PIN; the count survives a restart.
        #expect(error(try await pin("pin-token", "0000")).contains("PIN_INVALID"))
        #expect(error(try await pin("pin-token", "0000", "--protocol", "1")).contains("PIN_INVALID"))
        #expect(error(try await pin("pin-token", "0000")).contains("PIN_AUTH_BLOCKED"))
        #expect(error(try await pin("pin-token", "1234")).contains("PIN_AUTH_BLOCKED"))
        try await restart()
        #expect(try await pin("pin-retries")["retries"] as? Int == 5)
        #expect(try await pin("pin-change", "1234", "4321")["ok"] as? Bool == true)
        #expect(try await pin("pin-retries")["retries"] as? Int == 8)
        #expect(error(try await pin("pin-token", "1234")).contains("PIN_INVALID"))
        #expect(try await pin("pin-token", "4321", "--protocol", "1")["token_length"] as? Int == 32)

        // Eight wrong guesses in all block the PIN for good: restarts do not bring guesses back.
        for guess in 1...8 {
            let answer = error(try await pin("pin-token", "000\(guess)"))
            let expected = guess == 8 ? "PIN_BLOCKED" : guess % 3 == 0 ? "PIN_AUTH_BLOCKED" : "PIN_INVALID"
            #expect(answer.contains(expected), "guess \(guess): \(answer)")
            if guess % 3 == 0 { try await restart() }
        }
        #expect(error(try await pin("pin-token", "4321")).contains("PIN_BLOCKED"))
        try await restart()
        #expect(try await pin("pin-retries")["retries"] as? Int == 0)
        #expect(error(try await pin("pin-token", "4321")).contains("PIN_BLOCKED"))

        // A reset, asked at once after a start, takes the finger and removes the PIN and the passkeys.
        _ = server.stop()
        let resetLog = world.directory + "/fido-reset.log"
        let reset = Task {
            try await runCapturingOutput(URL(fileURLWithPath: python), [Self.client, "@" + resetLog, "reset"])
        }
        server = try SpawnedProcess(
            try lactlExecutable().path, ["fido", "serve", "--udp", "127.0.0.1:0"],
            environment: world.toolEnvironment(), log: resetLog)
        defer { _ = server.stop() }
        try await world.socket.send("SCAN alice-1")
        let resetAnswer = try await reset.value
        #expect(resetAnswer.output.contains("\"ok\": true"), "\(resetAnswer.output)")
        let resetAddress = try #require(
            (try String(contentsOfFile: resetLog, encoding: .utf8)).split(separator: "\n")
                .first { $0.hasPrefix("FIDO_UDP=") }?.dropFirst(9))
        let cleared = try await client(python, String(resetAddress), ["info"], world: world)
        #expect((cleared["options"] as? [String: Bool])?["clientPin"] == false, "\(cleared)")
        let listed = try await runCapturingOutput(
            try lactlExecutable(), ["fido", "list"], environment: world.toolEnvironment())
        #expect(!listed.output.contains("example.test"), "\(listed.output)")
        // 10 s after the start a reset is refused without asking anyone: ResetWindowTests, on a clock it moves.
        await world.close()
    }

    /// Two authenticators on one keychain (two `lactl fido serve`), six wrong guesses sent to them at once: every
    /// guess is counted. The count is a compare-and-swap on the PIN's item; this shows no count lost under
    /// concurrent guessing, though it cannot force the two writes to interleave.
    @Test func guessesSentToTwoAuthenticatorsAtOnceAreAllCounted() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        let (first, firstAddress, _) = try await serve(world)
        defer { _ = first.stop() }
        let (second, secondAddress, _) = try await serve(world)
        defer { _ = second.stop() }
        #expect(try await client(python, firstAddress, ["pin-set", "1234"], world: world)["ok"] as? Bool == true)
        let guesses = (0..<6).map { index in
            Task {
                try await runCapturingOutput(
                    URL(fileURLWithPath: python),
                    [Self.client, index % 2 == 0 ? firstAddress : secondAddress, "pin-token", "000\(index)"])
            }
        }
        for guess in guesses {
            let answer = try await guess.value.output
            #expect(answer.contains("PIN_INVALID") || answer.contains("PIN_AUTH_BLOCKED"), "\(answer)")
        }
        let retries = try await client(python, secondAddress, ["pin-retries"], world: world)
        #expect(retries["retries"] as? Int == 2, "\(retries)")
        await world.close()
    }

    /// hmac-secret through python-fido2's client: a credential made with it answers a salt with the same 32 bytes
    /// every time, a different salt with different bytes, and with and without user verification different bytes
    /// (two CredRandom values, kept as the right's secret and read only after the finger).
    @Test func hmacSecretGivesAStableSecretPerSaltAfterTheFinger() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let (server, address, log) = try await serve(world)
        defer { _ = server.stop() }
        let state = try relyingParty(world, "rp")
        let registered = try await client(
            python, address, ["register", state, "alice", "--hmac"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(registered["hmac"] as? Bool == true, "\(registered)")
        let saltA = String(repeating: "a1", count: 32)
        let saltB = String(repeating: "b2", count: 32)
        func secret(_ salt: String, uv: Bool) async throws -> String? {
            let answer = try await client(
                python, address, ["authenticate", state, "--salt", salt] + (uv ? ["--uv"] : []), world: world,
                scans: ["SCAN alice-1"], log: log)
            let output = answer["hmac"] as? String
            #expect(output?.count == 64, "\(answer)")
            return output
        }
        let first = try await secret(saltA, uv: false)
        #expect(try await secret(saltA, uv: false) == first)
        #expect(try await secret(saltB, uv: false) != first)
        #expect(try await secret(saltA, uv: true) != first)
        await world.close()
    }

    /// credProtect through python-fido2: a passkey at level 3 is found only with user verification, even named in
    /// the allow list; one at level 2 is found without it only when named; with user verification both are.
    @Test func credProtectHidesCredentialsFromSignInsWithoutVerification() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let (server, address, log) = try await serve(world)
        defer { _ = server.stop() }
        let required = try relyingParty(world, "required")
        let withList = try relyingParty(world, "with-list")
        for (directory, user, level) in [(required, "alice", 3), (withList, "bob", 2)] {
            let made = try await client(
                python, address, ["register", directory, user, "--resident", "--uv", "--protect", "\(level)"],
                world: world, scans: ["SCAN alice-1"], log: log)
            #expect(made["protect"] as? Int == level, "\(made)")
        }
        let discovered = try await client(python, address, ["authenticate", required, "--discoverable"], world: world)
        #expect((discovered["error"] as? String)?.contains("NO_CREDENTIALS") == true, "\(discovered)")
        let named = try await client(python, address, ["authenticate", required], world: world)
        #expect((named["error"] as? String)?.contains("NO_CREDENTIALS") == true, "\(named)")
        let listed = try await client(
            python, address, ["authenticate", withList], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(listed["user"] as? String == "bob", "\(listed)")
        let verified = try await client(
            python, address, ["authenticate", required, "--uv"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(verified["user"] as? String == "alice", "\(verified)")
        await world.close()
    }

    /// Credential management through python-fido2's `CredentialManagement` with a PIN token: the count and the room
    /// left (two passkeys at most here: a third is refused before the finger is asked, a server-side credential
    /// still fits), the relying parties and their accounts, a rename, a delete. A token bound to one relying party
    /// lists only its passkeys and cannot delete another's; a wrong PIN gets no token.
    @Test func passkeysAreCountedListedRenamedAndDeletedWithAPINToken() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let (server, address, log) = try await serve(world, arguments: ["--max-passkeys", "2"])
        defer { _ = server.stop() }
        func error(_ answer: [String: Any]) -> String { answer["error"] as? String ?? "no error: \(answer)" }
        let example = try relyingParty(world, "example")
        let other = try relyingParty(world, "other")
        let alice = try await client(
            python, address, ["register", example, "alice", "--resident", "--uv"], world: world,
            scans: ["SCAN alice-1"], log: log)
        let aliceID = try #require(alice["registered"] as? String, "\(alice)")
        let bob = try await client(
            python, address, ["--rp", "other.test", "register", other, "bob", "--resident", "--uv", "--protect", "2"],
            world: world, scans: ["SCAN alice-1"], log: log)
        let bobID = try #require(bob["registered"] as? String, "\(bob)")
        let full = try await client(
            python, address, ["register", try relyingParty(world, "example-carol"), "carol", "--resident"], world: world
        )
        #expect(error(full).contains("KEY_STORE_FULL"), "\(full)")
        let serverSide = try await client(
            python, address, ["register", try relyingParty(world, "example-dave"), "dave"], world: world,
            scans: ["SCAN alice-1"], log: log)
        #expect(serverSide["registered"] != nil, "\(serverSide)")

        let set = try await client(python, address, ["pin-set", "1234"], world: world)
        #expect(set["ok"] as? Bool == true, "\(set)")
        func passkeys(_ arguments: String...) async throws -> [String: [String: Any]] {
            let listed = try await client(python, address, ["creds", "1234"] + arguments, world: world)
            let parties = listed["rps"] as? [[String: Any]] ?? []
            #expect(!parties.isEmpty, "\(listed)")
            var byID: [String: [String: Any]] = [:]
            for party in parties {
                for credential in party["credentials"] as? [[String: Any]] ?? [] {
                    var entry = credential
                    entry["rp"] = party["id"]
                    entry["existing"] = listed["existing"]
                    entry["remaining"] = listed["remaining"]
                    byID[credential["id"] as? String ?? ""] = entry
                }
            }
            return byID
        }
        let both = try await passkeys()
        #expect(Set(both.keys) == [aliceID, bobID], "\(both)")
        #expect(both[aliceID]?["user"] as? String == "alice" && both[aliceID]?["display"] as? String == "Alice")
        #expect(both[aliceID]?["rp"] as? String == "example.test" && both[aliceID]?["key_alg"] as? Int == -7)
        #expect(both[bobID]?["rp"] as? String == "other.test" && both[bobID]?["protect"] as? Int == 2, "\(both)")
        #expect(both[aliceID]?["existing"] as? Int == 2 && both[aliceID]?["remaining"] as? Int == 0, "\(both)")

        // A token for other.test's credentials: bob's listed; the count, the sites, example.test's passkeys, and
        // renaming or deleting alice's are refused.
        let bound = try await passkeys("--bound", "other.test")
        #expect(Set(bound.keys) == [bobID], "\(bound)")
        let probed = try await client(
            python, address, ["cred-probe", "1234", "other.test", "example.test", aliceID], world: world)
        for name in ["metadata", "rps", "other_creds", "rename_other"] {
            #expect(probed[name] as? String == "PIN_AUTH_INVALID", "\(name): \(probed)")
        }
        let refused = try await client(
            python, address, ["cred-delete", "1234", aliceID, "--bound", "other.test"], world: world)
        #expect(error(refused).contains("PIN_AUTH_INVALID"), "\(refused)")

        let renamed = try await client(python, address, ["cred-rename", "1234", bobID, "robert"], world: world)
        #expect(renamed["ok"] as? Bool == true, "\(renamed)")
        let deleted = try await client(python, address, ["cred-delete", "1234", aliceID], world: world)
        #expect(deleted["ok"] as? Bool == true, "\(deleted)")
        let left = try await passkeys()
        #expect(Set(left.keys) == [bobID], "\(left)")
        #expect(left[bobID]?["user"] as? String == "robert" && left[bobID]?["display"] as? String == "Robert")
        #expect(left[bobID]?["existing"] as? Int == 1 && left[bobID]?["remaining"] as? Int == 1, "\(left)")
        let again = try await client(python, address, ["cred-delete", "1234", aliceID], world: world)
        #expect(error(again).contains("NO_CREDENTIALS"), "\(again)")
        let wrongPIN = try await client(python, address, ["creds", "9999"], world: world)
        #expect(error(wrongPIN).contains("PIN_INVALID"), "\(wrongPIN)")

        // The deleted passkey's key went with it; the server-side credential stays.
        let listed = try await runCapturingOutput(
            try lactlExecutable(), ["fido", "list"], environment: world.toolEnvironment())
        #expect(!listed.output.contains(aliceID) && listed.output.contains(bobID), "\(listed.output)")
        let rights = try await runCapturingOutput(
            try lactlExecutable(), ["rights", "list"], environment: world.toolEnvironment())
        #expect(
            !rights.output.contains("fido.\(aliceID)") && rights.output.contains("fido.\(bobID)"), "\(rights.output)")
        await world.close()
    }

    /// CTAP1/U2F through python-fido2's `Ctap1`, asking again while the authenticator answers "conditions not
    /// satisfied" as U2F clients do: a registration after the finger, whose self-signed attestation certificate and
    /// signature the library checks; a check-only request that names the key handle (0x6985) or another
    /// application (0x6A80); signatures after the finger with the counter moving; a CTAP2 credential answering
    /// under its RP ID's hash, except one whose credProtect level 3 asks for user verification, which U2F never
    /// gives.
    @Test func u2fRegistersAndSignsAfterTheFingerAndCTAP2CredentialsAnswerToo() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let (server, address, log) = try await serve(world)
        defer { _ = server.stop() }
        let legacy = try relyingParty(world, "u2f")
        let registered = try await client(
            python, address, ["u2f-register", legacy], world: world, scans: ["SCAN alice-1"], log: log)
        let handle = try #require(registered["key_handle"] as? String, "\(registered)")
        #expect(registered["version"] as? String == "U2F_V2", "\(registered)")
        #expect(registered["subject"] as? String == "CN=lactl fido U2F", "\(registered)")
        let known = try await client(python, address, ["u2f-authenticate", legacy, "--check"], world: world)
        #expect(known["check"] as? String == "0x6985", "\(known)")
        let otherApplication = try await client(
            python, address, ["u2f-authenticate", legacy, "--check", "--app", "https://other.test"], world: world)
        #expect(otherApplication["check"] as? String == "0x6a80", "\(otherApplication)")
        for expected in 1...2 {
            let signed = try await client(
                python, address, ["u2f-authenticate", legacy], world: world, scans: ["SCAN alice-1"], log: log)
            #expect(signed["counter"] as? Int == expected && signed["user_presence"] as? Int == 1, "\(signed)")
        }
        // The AppID through CTAP2 (the `appid` extension): the same credential, the counter moving on.
        let viaCTAP2 = try await client(
            python, address, ["u2f-authenticate", legacy, "--via-ctap2"], world: world, scans: ["SCAN alice-1"],
            log: log)
        #expect(viaCTAP2["counter"] as? Int == 3 && viaCTAP2["rp_id_hash_is_app"] as? Bool == true, "\(viaCTAP2)")
        // A client that only collects a touch gets an answer, and nothing is kept.
        let dummy = try await client(python, address, ["u2f-dummy"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(dummy["ok"] as? Bool == true, "\(dummy)")
        // Two key handles of one application polled in turn (authenticator-rs): one prompt, one signature.
        let second = try relyingParty(world, "u2f-second")
        let secondRegistered = try await client(
            python, address, ["u2f-register", second], world: world, scans: ["SCAN alice-1"], log: log)
        let secondHandle = try #require(secondRegistered["key_handle"] as? String, "\(secondRegistered)")
        let either = try await client(
            python, address, ["u2f-either", legacy, second], world: world, scans: ["SCAN alice-1"], log: log)
        #expect([handle, secondHandle].contains(either["signed_by"] as? String ?? ""), "\(either)")
        let listed = try await runCapturingOutput(
            try lactlExecutable(), ["fido", "list"], environment: world.toolEnvironment())
        #expect(listed.output.contains(handle) && listed.output.contains(secondHandle), "\(listed.output)")
        let u2fLines = listed.output.split(separator: "\n").filter { $0.contains("u2f:") }
        #expect(u2fLines.count == 2, "the touch-only registration kept nothing: \(listed.output)")

        let modern = try relyingParty(world, "ctap2")
        let made = try await client(
            python, address, ["register", modern, "alice"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(made["registered"] != nil, "\(made)")
        let overU2F = try await client(
            python, address, ["u2f-authenticate", modern, "--ctap2"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(overU2F["counter"] as? Int == 1, "\(overU2F)")
        let protected = try relyingParty(world, "protected")
        let strict = try await client(
            python, address, ["register", protected, "bob", "--resident", "--uv", "--protect", "3"], world: world,
            scans: ["SCAN alice-1"], log: log)
        #expect(strict["protect"] as? Int == 3, "\(strict)")
        let hidden = try await client(
            python, address, ["u2f-authenticate", protected, "--ctap2", "--check"], world: world)
        #expect(hidden["check"] as? String == "0x6a80", "\(hidden)")
        await world.close()
    }

    /// A client that cancels (CTAPHID_CANCEL) while the authenticator waits for the finger ends the prompt: the
    /// request answers KEEPALIVE_CANCEL at once, nothing is made, and the reader is free for the next request.
    @Test func cancelEndsTheFingerPromptAndFreesTheReader() async throws {
        let python = try Self.python()
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let (server, address, log) = try await serve(world)
        defer { _ = server.stop() }
        let state = try relyingParty(world, "rp")
        let cancelled = try await client(
            python, address, ["register", state, "alice", "--cancel-on-prompt", log], world: world)
        let error = cancelled["error"] as? String ?? "no error: \(cancelled)"
        #expect(error.contains("KEEPALIVE_CANCEL") || error.contains("CANCEL"), "\(cancelled)")
        // The prompt ended because of the cancel (written before the answer went out), not by the reader's timeout.
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        #expect(logText.contains("not approved: the evaluation was cancelled by the app"), "\(logText)")
        let listed = try await runCapturingOutput(
            try lactlExecutable(), ["fido", "list"], environment: world.toolEnvironment())
        #expect(listed.output.contains("No FIDO credentials."), "\(listed.output)")
        let registered = try await client(
            python, address, ["register", state, "alice"], world: world, scans: ["SCAN alice-1"], log: log)
        #expect(registered["registered"] != nil, "\(registered)")
        await world.close()
    }
}
