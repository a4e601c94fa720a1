-- rbscope: a wrapper that splits the third-party controller's bidirectional data bus.
--
-- The controller checked by benchmarks/third_party_onfi.py (Alexey Lyashko's ONFI
-- "nand_master", LGPL, from a local checkout; never copied into this repository) has one
-- inout DQ bus. cocotb drives plain inputs, so this wrapper resolves the bus here: the die's
-- byte goes on it while the die drives (dq_die_oe = '1'), otherwise the controller's own
-- drivers decide. A weak keeper holds the last level driven on each bit ('H' or 'L', high
-- before anything drove it), as a board's bus-hold keeps a released bus: the controller
-- samples data out once more after RE# has risen (its second sample is the byte it keeps),
-- when the emulator, behind its input synchronisers, may already have released the bus. The
-- controller reads the keeper's levels as the logic levels they are (an input buffer does;
-- VHDL's 'H' /= '1' would not). dq shows the resolved low byte, as a logic analyser sees it.

library ieee;
use ieee.std_logic_1164.all;

entity onfi_master_wrap is
    port (
        clk, nreset, enable, activate : in std_logic;
        cmd_in, data_in : in std_logic_vector(7 downto 0);
        data_out : out std_logic_vector(7 downto 0);
        busy : out std_logic;
        cle, ale, nwe, nwp, nce, nre : out std_logic;
        rnb : in std_logic;
        dq_die : in std_logic_vector(7 downto 0);
        dq_die_oe : in std_logic;
        dq : out std_logic_vector(7 downto 0)
    );
end entity onfi_master_wrap;

architecture wrap of onfi_master_wrap is
    -- Weak levels as the logic levels an input buffer reads; every other value unchanged.
    function strong(v : std_logic_vector) return std_logic_vector is
        variable r : std_logic_vector(v'range);
    begin
        for i in v'range loop
            case v(i) is
                when 'H' => r(i) := '1';
                when 'L' => r(i) := '0';
                when others => r(i) := v(i);
            end case;
        end loop;
        return r;
    end function;

    -- What the controller drives goes on the bus as it is (a port conversion needs both ways).
    function as_driven(v : std_logic_vector) return std_logic_vector is
    begin
        return v;
    end function;

    signal data_bus : std_logic_vector(15 downto 0);
    signal kept : std_logic_vector(7 downto 0) := (others => '1');
begin
    data_bus <= x"00" & dq_die when dq_die_oe = '1' else (others => 'Z');
    keeper : for i in 0 to 7 generate
        kept(i) <= data_bus(i) when data_bus(i) = '0' or data_bus(i) = '1' else kept(i);
        data_bus(i) <= 'H' when kept(i) = '1' else 'L';
    end generate;
    dq <= to_x01(data_bus(7 downto 0));

    master : entity work.nand_master
        port map (
            clk => clk, enable => enable,
            nand_cle => cle, nand_ale => ale, nand_nwe => nwe, nand_nwp => nwp,
            nand_nce => nce, nand_nre => nre, nand_rnb => rnb, 
            as_driven(nand_data) => strong(data_bus),
            nreset => nreset, data_out => data_out, data_in => data_in, busy => busy,
            activate => activate, cmd_in => cmd_in
        );
end architecture wrap;
