-- rbscope: a wrapper that splits the third-party controller's bidirectional data bus.
--
-- The controller checked by benchmarks/third_party_onfi.py (Alexey Lyashko's ONFI
-- "nand_master", LGPL, from a local checkout; never copied into this repository) has one
-- inout DQ bus. cocotb drives plain inputs, so this wrapper resolves the bus here: the die's
-- byte goes on it while the die drives (dq_die_oe = '1'), otherwise the controller's own
-- drivers (or nothing: 'Z', read back as the pull-ups' FFh) decide. dq shows the resolved
-- low byte, as a logic analyser on the bus would see it.

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
    signal data_bus : std_logic_vector(15 downto 0);
begin
    data_bus <= x"00" & dq_die when dq_die_oe = '1' else (others => 'Z');
    -- Undriven bits read as 1 (the bus's pull-ups), so that dq is always a number.
    pull : for i in 0 to 7 generate
        dq(i) <= '1' when data_bus(i) = 'Z' else data_bus(i);
    end generate;

    master : entity work.nand_master
        port map (
            clk => clk, enable => enable,
            nand_cle => cle, nand_ale => ale, nand_nwe => nwe, nand_nwp => nwp,
            nand_nce => nce, nand_nre => nre, nand_rnb => rnb, nand_data => data_bus,
            nreset => nreset, data_out => data_out, data_in => data_in, busy => busy,
            activate => activate, cmd_in => cmd_in
        );
end architecture wrap;
