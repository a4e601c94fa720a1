// The simulated rbscope device: the gateware (Verilator model of `rbscope_device`) with its R/B#
// pins driven from a stimulus file and its UART bridged, bit by bit, to a pseudo-terminal.
//
// Written for `rbscope sim` (host/device/simdevice.py), which builds it and explains the options. The
// host talks to the pty exactly as it talks to /dev/ttyUSB0. Simulated time runs as fast as the
// model allows; the device reports its declared clock, so ticks convert to real NAND time.
//
// Stimulus file (little-endian): "RBSTIM01", u32 channels, u32 reserved, u64 initial pin word,
// u64 count, then count records of (u64 cycle, u64 pin word); cycle 0 is the first cycle after
// reset. After the last record the pins keep their last levels.
//
// Command file (emulator builds only, `--commands`; written by rbscope.refssd.rtl): the NAND
// command sequences an SSD controller issued, replayed as ONFI bus cycles into the emulated dies
// (a small reactive ONFI host, so the simulation needs no Python per cycle). Little-endian:
// "RBCMD001", u32 dies, u32 reserved, u64 count, then count records of (u64 cycle, u8 die,
// u8 n, n x (u8 kind, u8 byte)); kind 0 = command (CLE), 1 = address (ALE), 2 = data in. The
// record's last bus cycle (its confirm command) has its WE# rising edge at `cycle`, or later:
// a sequence starts only when the previous one has left the bus and its die's R/B# is high
// (and a few cycles have passed since that die's last confirm, so that its R/B# has had time
// to fall). Records are issued in file order; each WE# level lasts one clock cycle.
// A record with n = 0 is a barrier: once every earlier command is issued and every die is
// ready, the harness prints "BARRIER cycle=C" and waits for SIGUSR1 (the host's go, e.g. after
// clearing the counters); the cycles of the records after it count from the cycle the signal
// arrived. (Commands before a barrier bring the dies into the state an SSD's FTL left them in.)

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <random>
#include <string>
#include <termios.h>
#include <unistd.h>
#include <vector>

#include "Vrbscope_device.h"
#include "verilated.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_go = 0;
void on_signal(int) { g_stop = 1; }
void on_go(int) { g_go = 1; }

struct Options {
    std::string stimulus;
    std::string link;  // a symlink kept pointing at the current pty slave
    unsigned divisor = 4;      // clock cycles a bit: divisor / divisor_den (e.g. 25/3)
    unsigned divisor_den = 1;
    uint64_t max_cycles = 0;  // 0: run until stopped
    double flip_rate = 0;     // test-only link corruption, per byte sent
    double drop_rate = 0;
    uint64_t vanish_at = 0;   // test-only: close the pty at this cycle ...
    uint64_t vanish_for = 0;  // ... and open a new one this many cycles later
    unsigned seed = 1;
    std::string commands;     // emulator builds: the command file to replay
    unsigned guard = 24;      // cycles after a confirm before the die's R/B# counts as ready
};

// Cycles bit k of a frame lasts: floor((k + 1) N / D) - floor(k N / D) (N, D: the divisor).
unsigned bit_cycles(const Options &o, unsigned k) {
    return static_cast<unsigned>((uint64_t(k + 1) * o.divisor) / o.divisor_den
                                 - (uint64_t(k) * o.divisor) / o.divisor_den);
}

// Cycle of bit k's middle after a start bit's edge: floor((k + 1/2) N / D).
unsigned half_edge(const Options &o, unsigned k) {
    return static_cast<unsigned>((uint64_t(2 * k + 1) * o.divisor) / (2 * o.divisor_den));
}


[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr, "rbscope-sim: %s\n", msg);
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value after " + a).c_str());
            return argv[++i];
        };
        if (a == "--stimulus") o.stimulus = value();
        else if (a == "--link") o.link = value();
        else if (a == "--divisor") {
            // N or N/D: a fractional divisor's bits last floor((k+1) N/D) - floor(k N/D)
            std::string v = value();
            auto slash = v.find('/');
            o.divisor = std::stoul(v.substr(0, slash));
            if (slash != std::string::npos) o.divisor_den = std::stoul(v.substr(slash + 1));
        }
        else if (a == "--max-cycles") o.max_cycles = std::stoull(value());
        else if (a == "--flip-rate") o.flip_rate = std::stod(value());
        else if (a == "--drop-rate") o.drop_rate = std::stod(value());
        else if (a == "--vanish-at") o.vanish_at = std::stoull(value());
        else if (a == "--vanish-for") o.vanish_for = std::stoull(value());
        else if (a == "--seed") o.seed = std::stoul(value());
        else if (a == "--commands") o.commands = value();
        else if (a == "--guard") o.guard = std::stoul(value());
        else if (a.rfind("+verilator", 0) == 0) continue;
        else usage(("unknown option " + a).c_str());
    }
    if (o.stimulus.empty() || o.link.empty()) usage("--stimulus and --link are required");
    if (o.divisor_den == 0 || o.divisor < 4 * o.divisor_den)
        usage("--divisor must be at least 4 (N or N/D)");
    return o;
}

struct Stimulus {
    uint32_t channels = 0;
    uint64_t initial = 0;
    std::vector<std::pair<uint64_t, uint64_t>> edges;
};

Stimulus load(const std::string& path) {
    Stimulus s;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) usage(("cannot open stimulus " + path + ": " + std::strerror(errno)).c_str());
    char magic[8];
    uint32_t reserved;
    uint64_t count;
    if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "RBSTIM01", 8) != 0)
        usage("stimulus: bad magic");
    if (std::fread(&s.channels, 4, 1, f) != 1 || std::fread(&reserved, 4, 1, f) != 1 ||
        std::fread(&s.initial, 8, 1, f) != 1 || std::fread(&count, 8, 1, f) != 1)
        usage("stimulus: truncated header");
    s.edges.resize(count);
    for (auto& e : s.edges)
        if (std::fread(&e.first, 8, 1, f) != 1 || std::fread(&e.second, 8, 1, f) != 1)
            usage("stimulus: truncated record");
    std::fclose(f);
    return s;
}

struct Command {
    uint64_t cycle;
    uint8_t die;
    std::vector<std::pair<uint8_t, uint8_t>> bus;  // (kind, byte)
};

std::vector<Command> load_commands(const std::string& path, uint32_t* dies) {
    std::vector<Command> out;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) usage(("cannot open command file " + path + ": " + std::strerror(errno)).c_str());
    char magic[8];
    uint32_t reserved;
    uint64_t count;
    if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "RBCMD001", 8) != 0)
        usage("command file: bad magic");
    if (std::fread(dies, 4, 1, f) != 1 || std::fread(&reserved, 4, 1, f) != 1 ||
        std::fread(&count, 8, 1, f) != 1)
        usage("command file: truncated header");
    out.resize(count);
    for (auto& c : out) {
        uint8_t n;
        if (std::fread(&c.cycle, 8, 1, f) != 1 || std::fread(&c.die, 1, 1, f) != 1 ||
            std::fread(&n, 1, 1, f) != 1)
            usage("command file: truncated record");
        c.bus.resize(n);
        for (auto& b : c.bus)
            if (std::fread(&b.first, 1, 1, f) != 1 || std::fread(&b.second, 1, 1, f) != 1 ||
                b.first > 2)
                usage("command file: truncated record or bad bus-cycle kind");
        if (c.die >= *dies) usage("command file: die out of range");
    }
    std::fclose(f);
    return out;
}

// Replays a command file on the emulator's ONFI pins (see the command file format above).
struct Replay {
    std::vector<Command> cmds;
    std::vector<uint64_t> guard_until;  // per die
    size_t next = 0;
    bool active = false;
    size_t pos = 0;       // bus cycle within the active sequence
    unsigned half = 0;    // 0: WE# low, 1: WE# high
    uint64_t late = 0, max_late = 0, late_sum = 0;
    uint64_t base = 0;          // cycle the last barrier was passed at
    bool reported = false, waiting = false;

    bool done() const { return next >= cmds.size() && !active; }

    // Decide this cycle's pin levels. `rb` is the dies' R/B# (1 = ready) before the edge.
    template <typename Top>
    void step(uint64_t cycle, Top* top, unsigned rb, unsigned guard) {
        unsigned all = (1u << guard_until.size()) - 1;
        if (!active && next < cmds.size() && cmds[next].bus.empty()) {  // a barrier
            bool ready = (rb & all) == all;
            for (uint64_t g : guard_until) ready = ready && cycle >= g;
            if (ready && !waiting) {
                waiting = true;
                std::printf("BARRIER cycle=%llu\n", static_cast<unsigned long long>(cycle));
                std::fflush(stdout);
            }
            if (waiting && g_go) {
                g_go = 0;
                waiting = false;
                base = cycle;
                late = max_late = late_sum = 0;  // count the lateness of what follows only
                ++next;
            }
        }
        if (!active && next < cmds.size() && !cmds[next].bus.empty()) {
            const Command& c = cmds[next];
            uint64_t len = 2 * c.bus.size() - 1;  // cycles before the confirm's rising edge
            uint64_t at = base + c.cycle;
            uint64_t start = at >= len ? at - len : 0;
            if (cycle >= start && ((rb >> c.die) & 1) && cycle >= guard_until[c.die]) {
                active = true;
                pos = 0;
                half = 0;
                uint64_t l = cycle - start;
                if (l) { ++late; late_sum += l; if (l > max_late) max_late = l; }
            }
        }
        if (!active) {
            top->emu_ce_n = (1u << guard_until.size()) - 1;
            top->emu_cle = 0; top->emu_ale = 0; top->emu_we_n = 1;
            return;
        }
        const Command& c = cmds[next];
        auto [kind, byte] = c.bus[pos];
        top->emu_ce_n = ((1u << guard_until.size()) - 1) & ~(1u << c.die);
        top->emu_cle = kind == 0;
        top->emu_ale = kind == 1;
        top->emu_io_i = byte;
        top->emu_we_n = half;
        if (++half == 2) {
            half = 0;
            if (++pos == c.bus.size()) {
                active = false;
                guard_until[c.die] = cycle + guard;
                ++next;
            }
        }
    }
};

// A pseudo-terminal whose slave path is published through a symlink. The harness keeps the
// slave open itself, so the line discipline stays raw and writes never fail for lack of a
// reader (they fail with EAGAIN when the host does not read: bytes are then lost, as on a real
// USB-serial bridge).
struct Pty {
    int master = -1, slave = -1;
    std::string link;

    void open_new() {
        master = posix_openpt(O_RDWR | O_NOCTTY);
        if (master < 0 || grantpt(master) || unlockpt(master)) usage("cannot create a pty");
        const char* name = ptsname(master);
        slave = ::open(name, O_RDWR | O_NOCTTY);
        termios t{};
        tcgetattr(slave, &t);
        cfmakeraw(&t);
        tcsetattr(slave, TCSANOW, &t);
        fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
        std::string tmp = link + ".tmp";
        ::unlink(tmp.c_str());
        if (::symlink(name, tmp.c_str()) || ::rename(tmp.c_str(), link.c_str()))
            usage(("cannot publish the pty at " + link).c_str());
        std::printf("PORT %s %s\n", link.c_str(), name);
        std::fflush(stdout);
    }
    void close_all() {
        if (master >= 0) ::close(master);
        if (slave >= 0) ::close(slave);
        master = slave = -1;
        ::unlink(link.c_str());
        std::printf("VANISHED %s\n", link.c_str());
        std::fflush(stdout);
    }
    bool up() const { return master >= 0; }
};

}  // namespace

int main(int argc, char** argv) {
    Options opt = parse(argc, argv);
    Stimulus stim = load(opt.stimulus);
    Replay replay;
    if (!opt.commands.empty()) {
#ifdef RBSCOPE_EMU
        uint32_t dies = 0;
        replay.cmds = load_commands(opt.commands, &dies);
        if (dies != RBSCOPE_EMU) usage("command file: its die count is not the emulator's");
        replay.guard_until.assign(dies, 0);
#else
        usage("--commands needs a device built with the NAND emulator");
#endif
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGUSR1, on_go);

    auto ctx = std::make_unique<VerilatedContext>();
    auto top = std::make_unique<Vrbscope_device>(ctx.get());
    std::mt19937_64 rng(opt.seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);

    Pty pty;
    pty.link = opt.link;
    pty.open_new();

    // Reset for 4 cycles with the pins at their initial levels.
    top->rb = stim.initial;
    top->uart_rx = 1;
#ifdef RBSCOPE_EMU
    // The emulator's bus idles: no die selected, WE#/RE# high, writes allowed.
    top->emu_ce_n = (1u << RBSCOPE_EMU) - 1;  // RBSCOPE_EMU: the number of emulated dies
    top->emu_we_n = 1;
    top->emu_re_n = 1;
    top->emu_wp_n = 1;
    top->emu_cle = 0;
    top->emu_ale = 0;
#endif
    top->rst = 1;
    for (int i = 0; i < 4; ++i) {
        top->clk = 0; top->eval();
        top->clk = 1; top->eval();
    }
    top->rst = 0;

    // UART towards the host: sample the TX line every cycle.
    unsigned tx_timer = 0, tx_bit = 0, tx_byte = 0;
    bool tx_busy = false;
    std::vector<uint8_t> out;
    uint64_t dropped_bytes = 0;
    // UART from the host.
    std::deque<uint8_t> in;
    unsigned rx_timer = 0, rx_bit = 0;
    uint16_t rx_frame = 0;
    bool rx_busy = false;

    size_t next_edge = 0;
    uint64_t reappear_at = 0;
    uint64_t cycle = 0;
    for (; !g_stop && (opt.max_cycles == 0 || cycle < opt.max_cycles); ++cycle) {
        while (next_edge < stim.edges.size() && stim.edges[next_edge].first <= cycle)
            top->rb = stim.edges[next_edge++].second;
#ifdef RBSCOPE_EMU
        if (!replay.cmds.empty()) {
            replay.step(cycle, top.get(), top->emu_rb, opt.guard);
            if (replay.done() && !replay.reported) {
                replay.reported = true;
                std::printf("REPLAYED commands=%zu cycle=%llu late=%llu late_cycles=%llu "
                            "max_late=%llu\n", replay.cmds.size(),
                            static_cast<unsigned long long>(cycle),
                            static_cast<unsigned long long>(replay.late),
                            static_cast<unsigned long long>(replay.late_sum),
                            static_cast<unsigned long long>(replay.max_late));
                std::fflush(stdout);
            }
        }
#endif

        // Drive the RX line: bit k of a frame from cycle floor(k * divisor) on, 8N1.
        if (!rx_busy && !in.empty()) {
            rx_frame = static_cast<uint16_t>((in.front() << 1) | 0x200);  // start 0, stop 1
            in.pop_front();
            rx_busy = true;
            rx_bit = 0;
            rx_timer = 0;
        }
        if (rx_busy) {
            top->uart_rx = (rx_frame >> rx_bit) & 1;
            if (++rx_timer == bit_cycles(opt, rx_bit)) {
                rx_timer = 0;
                if (++rx_bit == 10) rx_busy = false;
            }
        } else {
            top->uart_rx = 1;
        }

        top->clk = 0; top->eval();
        top->clk = 1; top->eval();

        // Decode the TX line: find a start bit, then sample the middle of every bit.
        bool line = top->uart_tx;
        if (!tx_busy) {
            if (!line) {
                tx_busy = true; tx_timer = half_edge(opt, 0); tx_bit = 0; tx_byte = 0;
            }
        } else if (tx_timer == 0) {
            if (tx_bit >= 1 && tx_bit <= 8) tx_byte |= (line ? 1u : 0u) << (tx_bit - 1);
            if (tx_bit == 9) {
                tx_busy = false;
                if (line) {
                    uint8_t b = static_cast<uint8_t>(tx_byte);
                    if (opt.flip_rate > 0 && unit(rng) < opt.flip_rate) b ^= 1u << (rng() % 8);
                    if (!(opt.drop_rate > 0 && unit(rng) < opt.drop_rate)) out.push_back(b);
                }
            } else {
                // The next bit's middle: floor((k + 3/2) divisor) after the start bit's edge.
                tx_timer = half_edge(opt, tx_bit + 1) - half_edge(opt, tx_bit) - 1;
            }
            ++tx_bit;
        } else {
            --tx_timer;
        }

        // The test-only "unplug": the port disappears, then a new one appears.
        if (opt.vanish_at && cycle == opt.vanish_at && pty.up()) {
            pty.close_all();
            reappear_at = cycle + opt.vanish_for;
        }
        if (!pty.up() && reappear_at && cycle >= reappear_at) {
            pty.open_new();
            reappear_at = 0;
        }

        if ((cycle & 255) == 0 && pty.up()) {
            if (!out.empty()) {
                ssize_t n = ::write(pty.master, out.data(), out.size());
                if (n < 0) {
                    if (errno == EAGAIN) { dropped_bytes += out.size(); out.clear(); }
                } else {
                    out.erase(out.begin(), out.begin() + n);
                }
            }
            uint8_t buf[256];
            ssize_t n = ::read(pty.master, buf, sizeof buf);
            for (ssize_t i = 0; i < n; ++i) in.push_back(buf[i]);
        } else if ((cycle & 255) == 0) {
            out.clear();  // nobody to send to while unplugged
        }
    }
    if (pty.up()) pty.close_all();
    std::printf("STOPPED cycles=%llu dropped_bytes=%llu\n",
                static_cast<unsigned long long>(cycle),
                static_cast<unsigned long long>(dropped_bytes));
    top->final();
    return 0;
}
